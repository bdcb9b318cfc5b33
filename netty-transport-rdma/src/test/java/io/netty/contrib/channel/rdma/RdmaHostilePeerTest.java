package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A peer that writes outside the receive ring it was given gets a remote access error, its connection is closed,
 * and the other connections of the same server, and their data, are untouched.
 */
@Timeout(60)
class RdmaHostilePeerTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void writeBeyondTheRingFailsAndTouchesNoOtherConnection() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<Void> hostileClosed = new CompletableFuture<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object child) {
                            // The well-behaved client stays connected until the end: the first to close is the
                            // attacker's. Watched from the server channel, which sees every accepted channel: one
                            // that fails before it is established never reaches the child handler.
                            ((Channel) child).closeFuture().addListener(f -> hostileClosed.complete(null));
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

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                    ctx.close();
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();

            // A well-behaved client with data in the server's ring before and after the attack.
            byte[] message = RdmaReceiveRingTest.random(100_000, 7);
            EchoCounter counter = new EchoCounter(2 * message.length);
            Channel good = new Bootstrap().group(group).channel(RdmaChannel.class).handler(counter)
                    .connect(address).sync().channel();
            good.writeAndFlush(Unpooled.wrappedBuffer(message)).sync();

            assertThat(writeBeyondTheServersRing(address))
                    .isIn("REM_ACCESS_ERR", "REM_OP_ERR", "REM_INV_REQ_ERR");
            hostileClosed.get(20, TimeUnit.SECONDS);

            good.writeAndFlush(Unpooled.wrappedBuffer(message)).sync();
            byte[] twice = new byte[2 * message.length];
            System.arraycopy(message, 0, twice, 0, message.length);
            System.arraycopy(message, 0, twice, message.length, message.length);
            assertThat(counter.done.get(20, TimeUnit.SECONDS)).isEqualTo(RdmaReceiveRingTest.crc(twice));
            assertThat(good.isActive()).isTrue();
            good.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * A connection without a ring whose peer RDMA-writes with an rkey it was never given: the server's device refuses
     * the write and puts the queue pair in error, which with a shared receive queue flushes nothing of the
     * connection's own; the device's async event (IBV_EVENT_QP_ACCESS_ERR) closes the channel at once, as its cause.
     */
    @Test
    void refusedRemoteWriteClosesAConnectionWithoutARing() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<Throwable> cause = new CompletableFuture<>();
        CompletableFuture<Long> closedAt = new CompletableFuture<>();
        CompletableFuture<Void> active = new CompletableFuture<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.closeFuture().addListener(f -> closedAt.complete(System.nanoTime()));
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    active.complete(null);
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
                                    cause.complete(t);
                                    ctx.close();
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
                active.get(10, TimeUnit.SECONDS);
                assertThat(peer.write(0x7f00_0001_0000L, 0x00ab_cd00, 256, null)).isEqualTo("REM_ACCESS_ERR");
                long written = System.nanoTime();
                assertThat(cause.get(10, TimeUnit.SECONDS)).hasMessageContaining("IBV_EVENT_QP_ACCESS_ERR");
                long millis = TimeUnit.NANOSECONDS.toMillis(closedAt.get(10, TimeUnit.SECONDS) - written);
                assertThat(millis).as("ms from the refused write to the channel's close").isLessThan(1000);
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** Connects with raw verbs and valid parameters, then RDMA-writes just past the end of the window of the server's first ring slab. */
    private static String writeBeyondTheServersRing(InetSocketAddress server) {
        try (RawPeer peer = new RawPeer(server)) {
            peer.awaitRing();
            return peer.write(peer.ringAddress + peer.slabSize, peer.ringRkeys[0], 4096, null);
        }
    }

    /** Completes with the CRC of everything echoed once {@code expected} bytes came back. */
    private static final class EchoCounter extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Long> done = new CompletableFuture<>();
        private final java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        private final int expected;
        private int received;

        EchoCounter(int expected) {
            this.expected = expected;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            crc.update(buf.nioBuffer());
            buf.release();
            if (received == expected) {
                done.complete(crc.getValue());
            }
        }
    }
}
