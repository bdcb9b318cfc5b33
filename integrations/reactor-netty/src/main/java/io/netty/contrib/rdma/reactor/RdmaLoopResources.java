package io.netty.contrib.rdma.reactor;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.Future;
import io.netty.util.internal.ObjectUtil;
import reactor.core.publisher.Mono;
import reactor.netty.resources.LoopResources;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * reactor-netty {@link LoopResources} over RDMA: {@link RdmaIoHandler} event loops, and for them
 * {@link RdmaChannel} (clients), {@link RdmaServerChannel} (servers) and Netty's own {@link EpollDatagramChannel}
 * (UDP, on the same loops: DNS resolution of host names; netty-transport-native-epoll, which reactor-netty-core
 * brings, must be on the class path). For {@code HttpServer}, {@code HttpClient} (WebSockets included),
 * {@code TcpServer} and {@code TcpClient}:
 *
 * <pre>
 * LoopResources loops = RdmaLoopResources.create("rdma");
 * HttpServer.create().runOn(loops) ...   HttpClient.create().runOn(loops) ...
 * </pre>
 *
 * <p>The {@code useNative} flags reactor-netty passes are ignored: these loops are always RDMA loops. Domain
 * sockets are not supported.
 */
public final class RdmaLoopResources implements LoopResources {
    private final String prefix;
    private final int selectCount;
    private final int workerCount;
    private final boolean daemon;
    private final RdmaIoHandlerConfig config;
    private final AtomicBoolean disposed = new AtomicBoolean();
    private EventLoopGroup workers;
    private EventLoopGroup selectors;
    private EventLoopGroup colocated;

    private RdmaLoopResources(String prefix, int selectCount, int workerCount, boolean daemon,
                              RdmaIoHandlerConfig config) {
        this.prefix = ObjectUtil.checkNonEmpty(prefix, "prefix");
        this.selectCount = selectCount;
        this.workerCount = ObjectUtil.checkPositive(workerCount, "workerCount");
        this.daemon = daemon;
        this.config = ObjectUtil.checkNotNull(config, "config");
    }

    /** {@link #DEFAULT_IO_WORKER_COUNT} worker loops that also accept connections; daemon threads. */
    public static RdmaLoopResources create(String prefix) {
        return create(prefix, DEFAULT_IO_WORKER_COUNT, true);
    }

    /** {@code workerCount} loops that do everything (accept, read, write, resolve). */
    public static RdmaLoopResources create(String prefix, int workerCount, boolean daemon) {
        return new RdmaLoopResources(prefix, -1, workerCount, daemon, new RdmaIoHandlerConfig());
    }

    /**
     * {@code selectCount} loops for accepting connections (-1: the workers accept too) and {@code workerCount}
     * loops for the connections, configured by {@code config}.
     */
    public static RdmaLoopResources create(String prefix, int selectCount, int workerCount, boolean daemon,
                                           RdmaIoHandlerConfig config) {
        if (selectCount < 1 && selectCount != -1) {
            throw new IllegalArgumentException("selectCount: " + selectCount + " (expected > 0 or -1)");
        }
        return new RdmaLoopResources(prefix, selectCount, workerCount, daemon, config);
    }

    @Override
    public synchronized EventLoopGroup onServer(boolean useNative) {
        if (disposed.get()) {
            throw new IllegalStateException("RdmaLoopResources " + prefix + " is disposed");
        }
        if (workers == null) {
            workers = new MultiThreadIoEventLoopGroup(workerCount,
                    new DefaultThreadFactory(prefix + "-rdma", daemon), RdmaIoHandler.newFactory(config));
        }
        return workers;
    }

    @Override
    public synchronized EventLoopGroup onServerSelect(boolean useNative) {
        if (selectCount == -1) {
            return onServer(useNative);
        }
        if (disposed.get()) {
            throw new IllegalStateException("RdmaLoopResources " + prefix + " is disposed");
        }
        if (selectors == null) {
            selectors = new MultiThreadIoEventLoopGroup(selectCount,
                    new DefaultThreadFactory(prefix + "-rdma-select", daemon), RdmaIoHandler.newFactory(config));
        }
        return selectors;
    }

    /** The worker loops, colocated: a connection made from a loop thread stays on that loop. */
    @Override
    public synchronized EventLoopGroup onClient(boolean useNative) {
        if (colocated == null) {
            colocated = LoopResources.colocate(onServer(useNative));
        }
        return colocated;
    }

    @Override
    public <CHANNEL extends Channel> CHANNEL onChannel(Class<CHANNEL> channelType, EventLoopGroup group) {
        return channelType.cast(newChannel(channelType));
    }

    @Override
    public <CHANNEL extends Channel> Class<? extends CHANNEL> onChannelClass(Class<CHANNEL> channelType,
                                                                            EventLoopGroup group) {
        return channelClass(channelType).asSubclass(channelType);
    }

    private static Channel newChannel(Class<?> channelType) {
        Class<? extends Channel> type = channelClass(channelType);
        if (type == RdmaChannel.class) {
            return new RdmaChannel();
        }
        if (type == RdmaServerChannel.class) {
            return new RdmaServerChannel();
        }
        return new EpollDatagramChannel();
    }

    private static Class<? extends Channel> channelClass(Class<?> channelType) {
        if (channelType.isAssignableFrom(RdmaChannel.class) && SocketChannel.class.isAssignableFrom(channelType)) {
            return RdmaChannel.class;
        }
        if (channelType.isAssignableFrom(RdmaServerChannel.class)
                && ServerSocketChannel.class.isAssignableFrom(channelType)) {
            return RdmaServerChannel.class;
        }
        if (channelType.isAssignableFrom(EpollDatagramChannel.class)
                && DatagramChannel.class.isAssignableFrom(channelType)) {
            return EpollDatagramChannel.class;
        }
        throw new IllegalArgumentException("RDMA loops have no channel of type " + channelType.getName()
                + " (they offer SocketChannel, ServerSocketChannel and DatagramChannel; no domain sockets)");
    }

    @Override
    public boolean daemon() {
        return daemon;
    }

    @Override
    public boolean isDisposed() {
        return disposed.get();
    }

    @Override
    public Mono<Void> disposeLater(Duration quietPeriod, Duration timeout) {
        return Mono.defer(() -> {
            if (!disposed.compareAndSet(false, true)) {
                return Mono.empty();
            }
            EventLoopGroup w;
            EventLoopGroup s;
            synchronized (this) {
                w = workers;
                s = selectors;
            }
            long quiet = quietPeriod.toMillis();
            long limit = Math.max(quiet, timeout.toMillis());
            Mono<Void> done = Mono.empty();
            for (EventLoopGroup g : new EventLoopGroup[] {s, w}) {
                if (g != null) {
                    Future<?> f = g.shutdownGracefully(quiet, limit, java.util.concurrent.TimeUnit.MILLISECONDS);
                    done = done.then(Mono.create(sink -> f.addListener(x -> {
                        if (x.isSuccess()) {
                            sink.success();
                        } else {
                            sink.error(x.cause());
                        }
                    })));
                }
            }
            return done;
        });
    }

    @Override
    public String toString() {
        return "RdmaLoopResources(" + prefix + ", workers " + workerCount + ", select " + selectCount + ")";
    }
}
