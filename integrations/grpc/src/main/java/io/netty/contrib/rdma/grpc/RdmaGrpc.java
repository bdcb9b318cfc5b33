package io.netty.contrib.rdma.grpc;

import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.util.internal.ObjectUtil;

import java.net.SocketAddress;

/**
 * Sets up grpc-netty's builders for RDMA: the RDMA channel types, the given {@link RdmaIoHandler} event loop
 * groups, and {@link RdmaByteBufAllocator#defaultAllocator()} as the channels' allocator. gRPC sets an allocator of
 * its own on every channel; with it, every message it writes would be copied once into registered memory.
 *
 * <pre>
 * EventLoopGroup group = new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory());
 * Server server = RdmaGrpc.serverBuilder(address, group, group).addService(...).build();
 * ManagedChannel channel = RdmaGrpc.channelBuilder(address, group).usePlaintext().build();
 * </pre>
 *
 * <p>Where some peers have no RDMA: {@link #withTcpFallback(NettyChannelBuilder)} lets a channel connect over TCP
 * when RDMA cannot reach its server, and {@link #withTcpListener(NettyServerBuilder)} makes a server answer TCP
 * clients (any gRPC client, NIO or epoll) on the same port number as RDMA ones.
 *
 * <p>gRPC does not shut down event loop groups it is given: they stay the application's. Call these after
 * creating the groups and keep the groups for as long as the server or channel lives (the default allocator is
 * freed when the last RDMA event loop stops).
 */
public final class RdmaGrpc {
    private RdmaGrpc() {
    }

    /**
     * A server builder for {@code address} over RDMA:
     * {@link #configure(NettyServerBuilder, EventLoopGroup, EventLoopGroup)}.
     */
    public static NettyServerBuilder serverBuilder(SocketAddress address, EventLoopGroup boss,
                                                   EventLoopGroup workers) {
        return configure(NettyServerBuilder.forAddress(address), boss, workers);
    }

    /**
     * Makes {@code builder} serve over RDMA: {@link RdmaServerChannel}, {@code boss} accepting, {@code workers}
     * (both {@link RdmaIoHandler} groups, possibly the same) carrying the connections, and the registered
     * allocator on the accepted channels.
     */
    public static NettyServerBuilder configure(NettyServerBuilder builder, EventLoopGroup boss,
                                               EventLoopGroup workers) {
        ObjectUtil.checkNotNull(builder, "builder");
        return builder.channelType(RdmaServerChannel.class)
                .bossEventLoopGroup(ObjectUtil.checkNotNull(boss, "boss"))
                .workerEventLoopGroup(ObjectUtil.checkNotNull(workers, "workers"))
                .withChildOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.defaultAllocator());
    }

    /** A channel builder for {@code address} over RDMA: {@link #configure(NettyChannelBuilder, EventLoopGroup)}. */
    public static NettyChannelBuilder channelBuilder(SocketAddress address, EventLoopGroup group) {
        return configure(NettyChannelBuilder.forAddress(address), group);
    }

    /**
     * Makes {@code builder} connect over RDMA: {@link RdmaChannel} on {@code group} (an {@link RdmaIoHandler}
     * group) with the registered allocator.
     */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, EventLoopGroup group) {
        ObjectUtil.checkNotNull(builder, "builder");
        return builder.channelType(RdmaChannel.class)
                .eventLoopGroup(ObjectUtil.checkNotNull(group, "group"))
                .withOption(ChannelOption.ALLOCATOR, RdmaByteBufAllocator.defaultAllocator());
    }

    /**
     * Makes a channel of {@code builder} (configured for RDMA) connect over TCP when RDMA cannot reach the server
     * ({@link RdmaChannelOption#TCP_FALLBACK}: nothing listens for RDMA there, no RDMA route, no RDMA on this host).
     */
    public static NettyChannelBuilder withTcpFallback(NettyChannelBuilder builder) {
        return ObjectUtil.checkNotNull(builder, "builder").withOption(RdmaChannelOption.TCP_FALLBACK, true);
    }

    /**
     * Makes a server of {@code builder} (configured for RDMA) also listen for TCP clients on its port
     * ({@link RdmaChannelOption#TCP_LISTEN}); they reach the same services.
     */
    public static NettyServerBuilder withTcpListener(NettyServerBuilder builder) {
        return ObjectUtil.checkNotNull(builder, "builder").withOption(RdmaChannelOption.TCP_LISTEN, true);
    }
}
