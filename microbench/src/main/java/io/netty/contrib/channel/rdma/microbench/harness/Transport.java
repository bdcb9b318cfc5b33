package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
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

/** The Netty transports the harness runs in two JVMs: a name, a mode, and how to build loops and channels. */
enum Transport {
    RDMA_ADAPTIVE("rdma", "adaptive"),
    RDMA_BUSY_POLL("rdma", "busy-poll"),
    /** Loops that never spin: every wait blocks on the completion channel (the device's wake-up path). */
    RDMA_BLOCKING("rdma", "blocking"),
    EPOLL("epoll", "tcp"),
    NIO("nio", "tcp");

    final String transport;
    final String mode;

    Transport(String transport, String mode) {
        this.transport = transport;
        this.mode = mode;
    }

    /**
     * The name on the command line: {@code rdma}, {@code rdma-busy-poll}, {@code rdma-blocking}, {@code epoll},
     * {@code nio}.
     */
    String key() {
        return switch (this) {
            case RDMA_ADAPTIVE -> "rdma";
            case RDMA_BUSY_POLL -> "rdma-busy-poll";
            case RDMA_BLOCKING -> "rdma-blocking";
            case EPOLL -> "epoll";
            case NIO -> "nio";
        };
    }

    /** The registered pool's pages ({@code -Dio.netty.contrib.rdma.bench.hugePages}, default AUTO), to compare. */
    private static final RdmaIoHandlerConfig.HugePages HUGE_PAGES = RdmaIoHandlerConfig.HugePages.valueOf(
            System.getProperty("io.netty.contrib.rdma.bench.hugePages", "AUTO"));

    static Transport of(String key) {
        for (Transport t : values()) {
            if (t.key().equals(key)) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown transport " + key + " (expected rdma, rdma-busy-poll,"
                + " rdma-blocking, epoll, nio or verbs)");
    }

    boolean rdma() {
        return this == RDMA_ADAPTIVE || this == RDMA_BUSY_POLL || this == RDMA_BLOCKING;
    }

    /** The loop configuration of an RDMA transport. */
    RdmaIoHandlerConfig config() {
        return switch (this) {
            case RDMA_ADAPTIVE -> new RdmaIoHandlerConfig().hugePages(HUGE_PAGES);
            case RDMA_BUSY_POLL -> RdmaIoHandlerConfig.spinning().hugePages(HUGE_PAGES);
            case RDMA_BLOCKING -> new RdmaIoHandlerConfig().spinNanos(0).hugePages(HUGE_PAGES);
            default -> throw new IllegalStateException(this + " is not an RDMA transport");
        };
    }

    IoHandlerFactory ioHandlerFactory() {
        return switch (this) {
            case RDMA_ADAPTIVE, RDMA_BUSY_POLL, RDMA_BLOCKING -> RdmaIoHandler.newFactory(config());
            case EPOLL -> {
                Epoll.ensureAvailability();
                yield EpollIoHandler.newFactory();
            }
            case NIO -> NioIoHandler.newFactory();
        };
    }

    Class<? extends ServerChannel> serverChannel() {
        return switch (this) {
            case RDMA_ADAPTIVE, RDMA_BUSY_POLL, RDMA_BLOCKING -> RdmaServerChannel.class;
            case EPOLL -> EpollServerSocketChannel.class;
            case NIO -> NioServerSocketChannel.class;
        };
    }

    Class<? extends SocketChannel> channel() {
        return switch (this) {
            case RDMA_ADAPTIVE, RDMA_BUSY_POLL, RDMA_BLOCKING -> RdmaChannel.class;
            case EPOLL -> EpollSocketChannel.class;
            case NIO -> NioSocketChannel.class;
        };
    }
}
