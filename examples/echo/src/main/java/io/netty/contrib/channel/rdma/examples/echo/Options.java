package io.netty.contrib.channel.rdma.examples.echo;

import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.netty.contrib.channel.rdma.RdmaServerChannel;

import java.util.Locale;

/**
 * Command-line options shared by {@link EchoServer} and {@link EchoClient}. {@code --transport epoll} or {@code nio}
 * runs the same code over TCP, for a comparison on the same machine.
 */
final class Options {
    /** The transports the example runs on: RDMA, and Netty's two TCP transports to compare with. */
    enum Transport { RDMA, EPOLL, NIO }

    Transport transport = Transport.RDMA;
    String address = "127.0.0.1";
    int port = 7474;
    int size = 64;
    int count = 10_000;
    int warmup;
    int concurrency = 1;
    int threads = 1;
    boolean busyPoll;
    long spinNanos = -1;
    boolean stats;
    int connectTimeoutSeconds = 30;
    /** Clients: connect over TCP where RDMA cannot reach the server (RdmaChannelOption.TCP_FALLBACK). */
    boolean tcpFallback;
    /** {@code RdmaChannelOption.TCP_FALLBACK_TIMEOUT_MILLIS}; 0 keeps the transport's default (2000). */
    int tcpFallbackTimeoutMillis;
    /** Servers: also answer TCP clients on the port (RdmaChannelOption.TCP_LISTEN). */
    boolean tcpListen;
    /** The client's IP_TOS: over RDMA the connection's traffic class (on RoCE v2 the IP header's TOS byte). */
    int tos;

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            switch (arg) {
                case "--address" -> o.address = value(args, ++i, arg);
                case "--port" -> o.port = intValue(args, ++i, arg, 0);
                case "--size" -> o.size = intValue(args, ++i, arg, 1);
                case "--count" -> o.count = intValue(args, ++i, arg, 1);
                case "--warmup" -> o.warmup = intValue(args, ++i, arg, 0);
                case "--transport" -> o.transport = transport(value(args, ++i, arg));
                case "--concurrency" -> o.concurrency = intValue(args, ++i, arg, 1);
                case "--threads" -> o.threads = intValue(args, ++i, arg, 1);
                case "--busy-poll" -> o.busyPoll = true;
                case "--stats" -> o.stats = true;
                case "--connect-timeout" -> o.connectTimeoutSeconds = intValue(args, ++i, arg, 1);
                case "--spin-nanos" -> o.spinNanos = intValue(args, ++i, arg, 0);
                case "--tcp-fallback" -> o.tcpFallback = true;
                case "--tcp-fallback-timeout" -> o.tcpFallbackTimeoutMillis = intValue(args, ++i, arg, 1);
                case "--tcp-listen" -> o.tcpListen = true;
                case "--tos" -> o.tos = intValue(args, ++i, arg, 0);
                case "--help", "-h" -> usage(null);
                default -> usage("unknown option " + arg);
            }
        }
        return o;
    }

    IoHandlerFactory ioHandlerFactory() {
        return switch (transport) {
            case RDMA -> RdmaIoHandler.newFactory((busyPoll ? RdmaIoHandlerConfig.spinning()
                    : spinNanos >= 0 ? new RdmaIoHandlerConfig().spinNanos(spinNanos) : new RdmaIoHandlerConfig())
                    // With a TCP path the example also runs on a host without RDMA.
                    .requireRdma(!tcpFallback && !tcpListen));
            case EPOLL -> EpollIoHandler.newFactory();
            case NIO -> NioIoHandler.newFactory();
        };
    }

    Class<? extends ServerChannel> serverChannelClass() {
        return switch (transport) {
            case RDMA -> RdmaServerChannel.class;
            case EPOLL -> EpollServerSocketChannel.class;
            case NIO -> NioServerSocketChannel.class;
        };
    }

    Class<? extends SocketChannel> channelClass() {
        return switch (transport) {
            case RDMA -> RdmaChannel.class;
            case EPOLL -> EpollSocketChannel.class;
            case NIO -> NioSocketChannel.class;
        };
    }

    /** Selects the bundled software device when RDMA is asked for and the machine has no RDMA hardware. */
    void selectDevice() {
        if (transport == Transport.RDMA) {
            SoftwareDevice.selectIfNoHardware();
        }
    }

    private static Transport transport(String name) {
        try {
            return Transport.valueOf(name.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            usage("--transport is rdma, epoll or nio, got " + name);
            return Transport.RDMA;
        }
    }

    private static String value(String[] args, int i, String name) {
        if (i >= args.length) {
            usage(name + " needs a value");
        }
        return args[i];
    }

    private static int intValue(String[] args, int i, String name, int min) {
        String v = value(args, i, name);
        try {
            int n = Integer.parseInt(v);
            if (n < min) {
                usage(name + " must be at least " + min + ", got " + n);
            }
            return n;
        } catch (NumberFormatException e) {
            usage(name + " needs a number, got " + v);
            return 0;
        }
    }

    private static void usage(String error) {
        if (error != null) {
            System.err.println(error);
        }
        System.err.println("options: --address A (127.0.0.1) --port P (7474) --size BYTES (64) --count N (10000)"
                + " --warmup N (0: echoes before the measured ones, not counted) --concurrency CONNECTIONS (1)"
                + " --threads LOOPS (1) --busy-poll --spin-nanos NS (the adaptive loop's longest spin, 50000)"
                + " --stats (the transport's counters at the end) --transport rdma|epoll|nio (rdma)"
                + " --tcp-fallback (clients: TCP where RDMA cannot reach the server) --tcp-fallback-timeout MS"
                + " (2000: how long RDMA may take before TCP is tried) --tcp-listen (servers: TCP"
                + " clients too, on the same port)"
                + " --connect-timeout SECONDS (30, Netty's default: each connection's whole set-up; rdma_cm's address"
                + " resolution in it has its own 2 s) --tos TOS (0: IP_TOS, over RDMA the traffic class, DSCP << 2)");
        System.exit(error == null ? 0 : 2);
    }
}
