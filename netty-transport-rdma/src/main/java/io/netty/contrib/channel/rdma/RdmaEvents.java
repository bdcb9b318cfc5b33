package io.netty.contrib.channel.rdma;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

import java.net.InetSocketAddress;

/**
 * JDK Flight Recorder events for what happens to connections: connected, accepted, rejected, closed, and protocol
 * errors of a peer. Enabled like any JFR event ({@code jfr configure}, a {@code .jfc} file, or
 * {@code -XX:StartFlightRecording}); disabled, each costs one check. None is on the data path.
 */
final class RdmaEvents {
    private RdmaEvents() {
    }

    static void connected(InetSocketAddress local, InetSocketAddress remote) {
        ConnectEvent e = new ConnectEvent();
        if (e.isEnabled()) {
            e.localAddress = String.valueOf(local);
            e.remoteAddress = String.valueOf(remote);
            e.commit();
        }
    }

    static void accepted(InetSocketAddress local, InetSocketAddress remote) {
        AcceptEvent e = new AcceptEvent();
        if (e.isEnabled()) {
            e.localAddress = String.valueOf(local);
            e.remoteAddress = String.valueOf(remote);
            e.commit();
        }
    }

    static void rejected(InetSocketAddress local, InetSocketAddress remote, String reason) {
        RejectEvent e = new RejectEvent();
        if (e.isEnabled()) {
            e.localAddress = String.valueOf(local);
            e.remoteAddress = String.valueOf(remote);
            e.reason = reason;
            e.commit();
        }
    }

    static void closed(InetSocketAddress local, InetSocketAddress remote, ConnectionCounters counters,
                       boolean byPeer) {
        CloseEvent e = new CloseEvent();
        if (e.isEnabled()) {
            e.localAddress = String.valueOf(local);
            e.remoteAddress = String.valueOf(remote);
            e.byPeer = byPeer;
            if (counters != null) {
                e.bytesWritten = counters.bytesWritten;
                e.bytesRead = counters.bytesRead;
            }
            e.commit();
        }
    }

    static void protocolError(InetSocketAddress local, InetSocketAddress remote, String message) {
        ProtocolErrorEvent e = new ProtocolErrorEvent();
        if (e.isEnabled()) {
            e.localAddress = String.valueOf(local);
            e.remoteAddress = String.valueOf(remote);
            e.message = message;
            e.commit();
        }
    }

    @Name("io.netty.contrib.rdma.Connect")
    @Label("RDMA Connect")
    @Description("A client connection was established")
    @Category({"Netty", "RDMA"})
    @StackTrace(false)
    static final class ConnectEvent extends Event {
        @Label("Local Address")
        String localAddress;
        @Label("Remote Address")
        String remoteAddress;
    }

    @Name("io.netty.contrib.rdma.Accept")
    @Label("RDMA Accept")
    @Description("A server accepted a connection and it was established")
    @Category({"Netty", "RDMA"})
    @StackTrace(false)
    static final class AcceptEvent extends Event {
        @Label("Local Address")
        String localAddress;
        @Label("Remote Address")
        String remoteAddress;
    }

    @Name("io.netty.contrib.rdma.Reject")
    @Label("RDMA Reject")
    @Description("A server refused a connection request")
    @Category({"Netty", "RDMA"})
    @StackTrace(false)
    static final class RejectEvent extends Event {
        @Label("Local Address")
        String localAddress;
        @Label("Remote Address")
        String remoteAddress;
        @Label("Reason")
        String reason;
    }

    @Name("io.netty.contrib.rdma.Close")
    @Label("RDMA Close")
    @Description("An established connection closed")
    @Category({"Netty", "RDMA"})
    @StackTrace(false)
    static final class CloseEvent extends Event {
        @Label("Local Address")
        String localAddress;
        @Label("Remote Address")
        String remoteAddress;
        @Label("By Peer")
        @Description("The peer disconnected or died; otherwise this side closed")
        boolean byPeer;
        @Label("Bytes Written")
        @DataAmount
        long bytesWritten;
        @Label("Bytes Read")
        @DataAmount
        long bytesRead;
    }

    @Name("io.netty.contrib.rdma.ProtocolError")
    @Label("RDMA Protocol Error")
    @Description("A peer broke the transport's protocol; the connection was closed")
    @Category({"Netty", "RDMA"})
    @StackTrace(false)
    static final class ProtocolErrorEvent extends Event {
        @Label("Local Address")
        String localAddress;
        @Label("Remote Address")
        String remoteAddress;
        @Label("Message")
        String message;
    }
}
