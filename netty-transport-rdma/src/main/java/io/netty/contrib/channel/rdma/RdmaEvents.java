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
 * JDK Flight Recorder events for what happens to connections: connected, accepted, rejected, closed, protocol
 * errors of a peer, and queue pair errors the device reports. Enabled like any JFR event ({@code jfr configure}, a
 * {@code .jfc} file, or {@code -XX:StartFlightRecording}); disabled, each costs one check. None is on the data path.
 */
final class RdmaEvents {
    private RdmaEvents() {
    }

    /**
     * A client connected: over RDMA with {@code settings} (read back from its queue pair), or over TCP
     * ({@code tcp}, settings null) because of {@code fallbackReason}.
     */
    static void connected(InetSocketAddress local, InetSocketAddress remote, RdmaConnectionSettings settings,
                          boolean tcp, String fallbackReason) {
        ConnectEvent e = new ConnectEvent();
        if (e.isEnabled()) {
            e.settings(settings);
            e.transport = tcp ? "TCP" : "RDMA";
            e.fallbackReason = fallbackReason;
            e.commitWith(local, remote);
        }
    }

    /** A server accepted a connection: over RDMA with {@code settings}, or from a TCP client ({@code tcp}). */
    static void accepted(InetSocketAddress local, InetSocketAddress remote, RdmaConnectionSettings settings,
                         boolean tcp) {
        AcceptEvent e = new AcceptEvent();
        if (e.isEnabled()) {
            e.settings(settings);
            e.transport = tcp ? "TCP" : "RDMA";
            e.commitWith(local, remote);
        }
    }

    static void rejected(InetSocketAddress local, InetSocketAddress remote, String reason) {
        RejectEvent e = new RejectEvent();
        if (e.isEnabled()) {
            e.reason = reason;
            e.commitWith(local, remote);
        }
    }

    static void closed(InetSocketAddress local, InetSocketAddress remote, ConnectionCounters counters,
                       boolean byPeer) {
        CloseEvent e = new CloseEvent();
        if (e.isEnabled()) {
            e.byPeer = byPeer;
            if (counters != null) {
                e.bytesWritten = counters.bytesWritten;
                e.bytesRead = counters.bytesRead;
            }
            e.commitWith(local, remote);
        }
    }

    static void protocolError(InetSocketAddress local, InetSocketAddress remote, String message) {
        ProtocolErrorEvent e = new ProtocolErrorEvent();
        if (e.isEnabled()) {
            e.message = message;
            e.commitWith(local, remote);
        }
    }

    static void queuePairError(InetSocketAddress local, InetSocketAddress remote, String event, String message) {
        QueuePairErrorEvent e = new QueuePairErrorEvent();
        if (e.isEnabled()) {
            e.event = event;
            e.message = message;
            e.commitWith(local, remote);
        }
    }

    /** What every event here names: the connection's two ends. Abstract, so JFR registers only the subclasses. */
    @Category({"Netty", "RDMA"})
    @StackTrace(false)
    abstract static class ConnectionEvent extends Event {
        @Label("Local Address")
        String localAddress;
        @Label("Remote Address")
        String remoteAddress;

        final void commitWith(InetSocketAddress local, InetSocketAddress remote) {
            localAddress = String.valueOf(local);
            remoteAddress = String.valueOf(remote);
            commit();
        }
    }

    /** An established connection: its queue pair's settings as the device reports them. */
    abstract static class EstablishedEvent extends ConnectionEvent {
        @Label("Transport")
        @Description("RDMA; or TCP: a client that fell back (TCP_FALLBACK), a TCP client of a dual-stack server"
                + " (TCP_LISTEN), without queue pair settings")
        String transport;
        @Label("Device")
        String device;
        @Label("Port")
        int port;
        @Label("GID Index")
        int gidIndex;
        @Label("GID Type")
        String gidType;
        @Label("Traffic Class")
        @Description("The GRH traffic class; on RoCE v2 the IP TOS byte (DSCP << 2 | ECN)")
        int trafficClass;
        @Label("Service Level")
        int serviceLevel;
        @Label("Path MTU")
        @DataAmount
        int pathMtu;
        @Label("ACK Timeout")
        @Description("Local ACK timeout code: 4.096 us * 2^code, 0 = infinite")
        int ackTimeout;
        @Label("Retry Count")
        int retryCount;
        @Label("RNR Retry Count")
        @Description("7 = infinite")
        int rnrRetryCount;
        @Label("Min RNR Timer")
        @Description("The RNR NAK timer code this side sends as responder")
        int minRnrTimer;

        final void settings(RdmaConnectionSettings s) {
            if (s == null) {
                return;
            }
            device = s.device();
            port = s.port();
            gidIndex = s.gidIndex();
            gidType = s.gidType();
            trafficClass = s.trafficClass();
            serviceLevel = s.serviceLevel();
            pathMtu = s.pathMtu();
            ackTimeout = s.ackTimeout();
            retryCount = s.retryCount();
            rnrRetryCount = s.rnrRetryCount();
            minRnrTimer = s.minRnrTimer();
        }
    }

    @Name("io.netty.contrib.rdma.Connect")
    @Label("RDMA Connect")
    @Description("A client connection was established")
    static final class ConnectEvent extends EstablishedEvent {
        @Label("Fallback Reason")
        @Description("Why the client connected over TCP instead of RDMA")
        String fallbackReason;
    }

    @Name("io.netty.contrib.rdma.Accept")
    @Label("RDMA Accept")
    @Description("A server accepted a connection and it was established")
    static final class AcceptEvent extends EstablishedEvent {
    }

    @Name("io.netty.contrib.rdma.Reject")
    @Label("RDMA Reject")
    @Description("A server refused a connection request")
    static final class RejectEvent extends ConnectionEvent {
        @Label("Reason")
        String reason;
    }

    @Name("io.netty.contrib.rdma.Close")
    @Label("RDMA Close")
    @Description("An established connection closed")
    static final class CloseEvent extends ConnectionEvent {
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
    static final class ProtocolErrorEvent extends ConnectionEvent {
        @Label("Message")
        String message;
    }

    @Name("io.netty.contrib.rdma.QueuePairError")
    @Label("RDMA Queue Pair Error")
    @Description("The device reported an asynchronous error of a connection's queue pair (or of the queue or device"
            + " it is on); the connection was closed")
    static final class QueuePairErrorEvent extends ConnectionEvent {
        @Label("Event")
        String event;

        @Label("Message")
        String message;
    }
}
