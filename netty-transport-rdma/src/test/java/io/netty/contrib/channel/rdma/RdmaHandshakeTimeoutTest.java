package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Clients that never finish the handshake (they take the server's accept but never send the last message, so the
 * server never sees ESTABLISHED) are torn down after {@link RdmaChannelOption#ESTABLISH_TIMEOUT_MILLIS}, while
 * the attacker stays alive, and a legitimate client connects and echoes meanwhile.
 */
@Timeout(60)
class RdmaHandshakeTimeoutTest {
    static {
        SoftwareRdma.use();
    }

    private static final int HALF_OPEN = 20;

    @Test
    void halfOpenHandshakesAreReleasedAndOthersStillConnect() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        List<CompletableFuture<Void>> halfOpenClosed = new ArrayList<>();
        try (CmEventChannel attacker = CmEventChannel.create()) {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS, 500)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object child) {
                            CompletableFuture<Void> closed = new CompletableFuture<>();
                            synchronized (halfOpenClosed) {
                                halfOpenClosed.add(closed);
                            }
                            ((Channel) child).closeFuture().addListener(f -> closed.complete(null));
                            ctx.fireChannelRead(child);
                        }
                    })
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
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            long qpsBefore = SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("qp") : 0;

            List<CmId> ids = new ArrayList<>();
            for (int i = 0; i < HALF_OPEN; i++) {
                ids.add(halfOpen(attacker, address));
            }
            // The server accepted them all: each holds a QP until the timeout.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (halfOpenClosed.size() < HALF_OPEN && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(halfOpenClosed).hasSize(HALF_OPEN);

            // A legitimate client during the flood.
            CompletableFuture<Integer> echoed = new CompletableFuture<>();
            Channel good = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            echoed.complete(((ByteBuf) msg).readableBytes());
                            ((ByteBuf) msg).release();
                        }
                    }).connect(address).sync().channel();
            good.writeAndFlush(Unpooled.wrappedBuffer(new byte[100]));
            assertThat(echoed.get(20, TimeUnit.SECONDS)).isEqualTo(100);

            for (int i = 0; i < HALF_OPEN; i++) {
                halfOpenClosed.get(i).get(20, TimeUnit.SECONDS);
            }
            if (SoftwareRdma.hasObjectCounts()) {
                // Only the good connection's two QPs are left (its client and its server side).
                assertThat(SoftwareRdma.objectCounts().get("qp")).isEqualTo(qpsBefore + 2);
            }
            good.close().sync();
            for (CmId id : ids) {
                id.close();
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void pendingHandshakesAndConnectionsPerAddressAreLimited() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        List<CmId> ids = new ArrayList<>();
        List<Channel> clients = new ArrayList<>();
        try (CmEventChannel attacker = CmEventChannel.create()) {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(RdmaChannelOption.MAX_PENDING_HANDSHAKES, 3)
                    .option(RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS, 5)
                    .childOption(RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS, 1000)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            // nothing to do: connections only
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            for (int i = 0; i < 3; i++) {
                ids.add(halfOpen(attacker, address));
            }
            // A fourth handshake in progress is one too many.
            CmId refused = attacker.createId();
            ids.add(refused);
            assertThat(connectUntil(attacker, refused, address)).isEqualTo("REJECTED");
            for (CmId id : ids) {
                id.close();
            }
            ids.clear();
            // The abandoned handshakes are released (at the latest by the 1 s timeout): five connections fit the
            // limit per address, a sixth does not.
            Bootstrap bootstrap = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            // nothing to do: connections only
                        }
                    });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (clients.size() < 5 && System.nanoTime() < deadline) {
                try {
                    clients.add(bootstrap.connect(address).sync().channel());
                } catch (Exception e) {
                    Thread.sleep(50); // the abandoned handshakes still count until they are released
                }
            }
            assertThat(clients).hasSize(5);
            assertThatThrownBy(() -> bootstrap.connect(address).sync()).hasMessageContaining("no resources");
            clients.remove(0).close().sync();
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            Channel again = null;
            while (again == null && System.nanoTime() < deadline) {
                try {
                    again = bootstrap.connect(address).sync().channel();
                } catch (Exception e) {
                    Thread.sleep(50); // the server sees the close shortly after the client
                }
            }
            assertThat(again).as("a connection after one of the five closed").isNotNull();
            clients.add(again);
            for (Channel c : clients) {
                c.close().sync();
            }
            server.close().sync();
        } finally {
            for (CmId id : ids) {
                id.close();
            }
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** Connects {@code id} without a QP; returns the name of the event that ends the attempt. */
    private static String connectUntil(CmEventChannel channel, CmId id, InetSocketAddress server) {
        id.resolveAddr(null, server, 2000);
        expect(channel, CmEventType.ADDR_RESOLVED);
        id.resolveRoute(2000);
        expect(channel, CmEventType.ROUTE_RESOLVED);
        byte[] params = new byte[ConnectParameters.LENGTH];
        new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(4).recvBufferSize(1024);
        id.connect(ConnParam.of(params).withQpNum(0x124));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        CmEvent event;
        while ((event = channel.pollEvent()) == null) {
            assertThat(System.nanoTime()).as("an answer to the connect").isLessThan(deadline);
            Thread.onSpinWait();
        }
        String name = CmEventType.name(event.type());
        event.ack();
        return name;
    }

    /** An rdma_cm client without a QP: takes the server's accept (CONNECT_RESPONSE) and never establishes. */
    private static CmId halfOpen(CmEventChannel channel, InetSocketAddress server) {
        CmId id = channel.createId();
        id.resolveAddr(null, server, 2000);
        expect(channel, CmEventType.ADDR_RESOLVED);
        id.resolveRoute(2000);
        expect(channel, CmEventType.ROUTE_RESOLVED);
        byte[] params = new byte[ConnectParameters.LENGTH];
        new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(4).recvBufferSize(1024);
        // No QP of its own: a made-up QP number, and the handshake stops at CONNECT_RESPONSE.
        id.connect(ConnParam.of(params).withQpNum(0x123));
        expect(channel, CmEventType.CONNECT_RESPONSE);
        return id;
    }

    private static void expect(CmEventChannel channel, int type) {
        // Never a blocking wait: a connection the server refuses must fail the test, not hang it.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        CmEvent event;
        while ((event = channel.pollEvent()) == null) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no rdma_cm event within 20 s (expected " + CmEventType.name(type) + ")");
            }
            Thread.onSpinWait();
        }
        int got = event.type();
        event.ack();
        assertThat(CmEventType.name(got)).isEqualTo(CmEventType.name(type));
    }
}
