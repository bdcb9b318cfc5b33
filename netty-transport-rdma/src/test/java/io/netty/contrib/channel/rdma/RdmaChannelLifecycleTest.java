package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.nio.channels.ClosedChannelException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Connection setup, failure, backpressure and teardown of the transport (on the software device by default). */
@Timeout(120)
class RdmaChannelLifecycleTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void connectToAPortNobodyListensOnFailsWithConnectException() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            long start = System.nanoTime();
            assertThatThrownBy(() -> new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(new InetSocketAddress(TestAddress.get(), 4)).sync())
                    .isInstanceOf(ConnectException.class)
                    .hasMessageContaining(TestAddress.host() + ":4");
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isLessThan(10_000);
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void connectTimeoutMillisFailsAConnectNobodyAnswers() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            // With AUTO_READ off on the server channel, connection requests wait in rdma_cm's backlog.
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInboundHandlerAdapter())
                    .bind(TestAddress.get(), 0).sync().channel();
            long start = System.nanoTime();
            assertThatThrownBy(() -> new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 300)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync())
                    .isInstanceOf(ConnectTimeoutException.class)
                    .hasMessageContaining(String.valueOf(((InetSocketAddress) server.localAddress()).getPort()));
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isBetween(250L, 10_000L);
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * A client closed while it connects (rdma_connect sent, no answer yet) fails its connect with
     * {@code ClosedChannelException}, was never active, so its pipeline sees neither channelActive nor
     * channelInactive, and frees its queue pair at once: nothing was established, so nothing lingers.
     */
    @Test
    void closeWhileConnectingFailsTheConnectAndFreesTheQueuePair() throws Exception {
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            // With AUTO_READ off on the server channel, connection requests wait in rdma_cm's backlog.
            Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                    .option(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInboundHandlerAdapter())
                    .bind(TestAddress.get(), 0).sync().channel();
            List<String> events = new CopyOnWriteArrayList<>();
            ChannelFuture connect = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelActive(ChannelHandlerContext ctx) {
                            events.add("active");
                        }

                        @Override
                        public void channelInactive(ChannelHandlerContext ctx) {
                            events.add("inactive");
                        }
                    })
                    .connect(server.localAddress());
            Channel client = connect.channel();
            RdmaIoHandlerMetric loop = RdmaIoHandler.metric(client.eventLoop());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (loop.queuePairs() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertThat(loop.queuePairs()).as("the client's queue pair, created at ROUTE_RESOLVED").isEqualTo(1);
            assertThat(connect.isDone()).isFalse();

            client.close().sync();

            assertThat(connect.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(connect.cause()).isInstanceOf(ClosedChannelException.class);
            assertThat(client.isOpen()).isFalse();
            assertThat(client.isActive()).isFalse();
            client.eventLoop().submit(() -> { }).sync(); // what close() left for the loop to do
            assertThat(events).isEmpty();
            assertThat(loop.queuePairs()).isZero();
            server.close().sync();
        } finally {
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * An accepted channel reaches its child handler connected, as an accepted TCP socket does: active in
     * {@code initChannel}, where a write goes out at once. Its rdma_cm id reports ESTABLISHED only after the
     * client's answer (REP, then RTU) while {@code initChannel} runs on the child's loop right after rdma_accept, so
     * a channel handed over before ESTABLISHED is always caught here: not active, and the write failed with
     * {@code NotYetConnectedException} (what Netty's {@code SocketReadPendingTest} hit when ESTABLISHED came late).
     */
    @Test
    void anAcceptedChannelIsActiveInItsChildHandlerAndWritesAtOnce() throws Exception {
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            CompletableFuture<Boolean> activeInInit = new CompletableFuture<>();
            CompletableFuture<Throwable> writeResult = new CompletableFuture<>();
            List<String> childEvents = new CopyOnWriteArrayList<>();
            CompletableFuture<Void> childActive = new CompletableFuture<>();
            Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            activeInInit.complete(ch.isActive());
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRegistered(ChannelHandlerContext ctx) {
                                    childEvents.add("registered");
                                    ctx.fireChannelRegistered();
                                }

                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    childEvents.add("active");
                                    childActive.complete(null);
                                    ctx.fireChannelActive();
                                }
                            });
                            ch.writeAndFlush(ch.alloc().directBuffer().writeInt(42))
                                    .addListener(f -> writeResult.complete(f.cause()));
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            CompletableFuture<Integer> received = new CompletableFuture<>();
            Channel client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            received.complete(((ByteBuf) msg).readInt());
                            ((ByteBuf) msg).release();
                        }
                    }).connect(server.localAddress()).sync().channel();
            assertThat(activeInInit.get(10, TimeUnit.SECONDS)).as("accepted channel active in initChannel").isTrue();
            assertThat(writeResult.get(10, TimeUnit.SECONDS)).as("write from initChannel").isNull();
            assertThat(received.get(10, TimeUnit.SECONDS)).isEqualTo(42);
            childActive.get(10, TimeUnit.SECONDS);
            assertThat(childEvents).containsExactly("registered", "active");
            client.close().sync();
            server.close().sync();
        } finally {
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * As with TCP and every Netty transport, closing the server channel stops accepting but leaves the accepted
     * channels open; shutting their event loops down closes them, and their peers see the close.
     */
    @Test
    void serverCloseLeavesChildrenOpenAndGroupShutdownClosesThem() throws Exception {
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ctx.writeAndFlush(msg);
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            CompletableFuture<Integer> echoed = new CompletableFuture<>();
            Channel client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            echoed.complete(((ByteBuf) msg).readableBytes());
                            ((ByteBuf) msg).release();
                        }
                    }).connect(server.localAddress()).sync().channel();
            server.close().sync();
            assertThatThrownBy(() -> new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync())
                    .isInstanceOf(ConnectException.class);
            client.writeAndFlush(client.alloc().directBuffer().writeZero(100));
            assertThat(echoed.get(10, TimeUnit.SECONDS)).isEqualTo(100);

            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            assertThat(client.closeFuture().await(10, TimeUnit.SECONDS)).as("client closed").isTrue();
        } finally {
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void manyChannelsOnFewLoopsThenShutdownLeavesNoDeviceObjects() throws Exception {
        boolean counted = SoftwareRdma.hasObjectCounts();
        Map<String, Long> before = counted ? SoftwareRdma.objectCounts() : null;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.writeAndFlush(msg);
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        List<CompletableFuture<Integer>> echoes = new ArrayList<>();
        List<Channel> clients = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            CompletableFuture<Integer> echoed = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        int received;

                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            received += ((ByteBuf) msg).readableBytes();
                            ((ByteBuf) msg).release();
                            if (received == 20_000) {
                                echoed.complete(received);
                            }
                        }
                    }).connect(server.localAddress()).sync().channel();
            client.writeAndFlush(client.alloc().directBuffer(20_000).writeZero(20_000));
            echoes.add(echoed);
            clients.add(client);
        }
        for (CompletableFuture<Integer> echoed : echoes) {
            assertThat(echoed.get(30, TimeUnit.SECONDS)).isEqualTo(20_000);
        }
        if (counted) {
            assertThat(SoftwareRdma.objectCounts().get("qp")).isEqualTo(before.get("qp") + 40);
        }
        clients.get(0).close().sync();
        server.close().sync();
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();

        // The echoes and the shutdown above ran on any device; the leak check needs the software device's counts.
        assumeTrue(counted, SoftwareRdma::noObjectCounts);
        Map<String, Long> after = SoftwareRdma.objectCounts();
        for (String kind : List.of("pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id", "cm_channel")) {
            assertThat(after.get(kind)).as("%s left after the group shut down", kind).isEqualTo(before.get(kind));
        }
    }

    @Test
    void slowReaderMakesTheWriterUnwritableAndLosesNothing() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        try {
            CompletableFuture<Channel> serverChild = new CompletableFuture<>();
            AtomicLong received = new AtomicLong();
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    serverChild.complete(ctx.channel());
                                }

                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    received.addAndGet(((ByteBuf) msg).readableBytes());
                                    ((ByteBuf) msg).release();
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(64 * 1024, 256 * 1024))
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            Channel child = serverChild.get(10, TimeUnit.SECONDS);

            long written = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (client.isWritable() && System.nanoTime() < deadline) {
                client.writeAndFlush(client.alloc().directBuffer(16 * 1024).writeZero(16 * 1024));
                written += 16 * 1024;
                if (written % (1 << 20) == 0) {
                    Thread.sleep(5); // let the writes reach the peer, so credit runs out rather than memory
                }
            }
            assertThat(client.isWritable()).as("writer still writable after %d bytes to a reader that reads nothing",
                    written).isFalse();
            // The peer holds at most its receive buffers and ring; the rest waits in the writer's outbound buffer.
            assertThat(written).isLessThan(64L << 20);

            child.config().setAutoRead(true);
            long expected = written;
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (received.get() < expected && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            assertThat(received.get()).isEqualTo(expected);
            assertThat(client.isWritable()).isTrue();
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
