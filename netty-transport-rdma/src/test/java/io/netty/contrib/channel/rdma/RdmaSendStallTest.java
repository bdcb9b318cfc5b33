package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A peer that answers this side's SENDs with RNR NAKs forever ({@code rnr_retry} 7 retries without end) and never
 * leaves: the channel closes once the device has owed it a completion for longer than
 * {@link RdmaIoHandlerConfig#sendStallTimeoutMillis}, naming why, instead of holding its writes forever. A reader
 * that merely stops reading for longer than that is no stall: its peer's sends still complete.
 */
@Timeout(60)
class RdmaSendStallTest {
    static {
        SoftwareRdma.use();
    }

    private static final long LIMIT_MILLIS = 1000;

    @Test
    void aPeerThatNeverTakesItsSendsClosesTheChannelWithANamedCause() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().sendStallTimeoutMillis(LIMIT_MILLIS)));
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        AtomicReference<Throwable> cause = new AtomicReference<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    accepted.complete(ctx.channel());
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
                                    cause.compareAndSet(null, t);
                                }
                            });
                        }
                    })
                    .bind(TestAddress.get(), 0).sync().channel();
            // The peer announces 64 credits and posts 4 receives: the SENDs past them get RNR NAKs, forever.
            try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress(), 64)) {
                Channel child = accepted.get(10, TimeUnit.SECONDS);
                // SENDs of their own (a flush each), inline and unsignalled: the progress check asks the device
                // about them with a signalled zero-length write behind them, which never completes either.
                long start = System.nanoTime();
                for (int i = 0; i < 2 * RawPeer.SLOTS; i++) {
                    child.writeAndFlush(Unpooled.wrappedBuffer(new byte[16]));
                }
                assertThat(child.closeFuture().await(LIMIT_MILLIS * 5, TimeUnit.MILLISECONDS))
                        .as("closed once the device owed it a completion for longer than the limit").isTrue();
                long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertThat(millis).as("not before the limit").isGreaterThanOrEqualTo(LIMIT_MILLIS);
                assertThat(cause.get()).isNotNull();
                assertThat(cause.get().getMessage()).contains("no send completion for")
                        .contains("sendStallTimeoutMillis");
                RdmaIoHandlerMetric loop = RdmaIoHandler.metric(server.eventLoop());
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (loop.queuePairs() != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertThat(loop.queuePairs()).as("queue pairs after the close").isZero();
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void aReaderThatStopsReadingLongerThanTheLimitIsNoStall() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().sendStallTimeoutMillis(300)));
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        AtomicLong read = new AtomicLong();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(ChannelOption.AUTO_READ, false)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    accepted.complete(ctx.channel());
                                }

                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    read.addAndGet(((ByteBuf) msg).readableBytes());
                                    ((ByteBuf) msg).release();
                                }
                            });
                        }
                    })
                    .bind(TestAddress.get(), 0).sync().channel();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            Channel child = accepted.get(10, TimeUnit.SECONDS);
            long sent = 0;
            for (int i = 0; i < 64; i++) {
                int size = i % 2 == 0 ? 100 : 200_000;
                client.write(Unpooled.wrappedBuffer(new byte[size]));
                sent += size;
            }
            client.flush();
            // Nothing is read for ten times the limit: the writer waits for credits and slabs, owing nothing.
            Thread.sleep(3000);
            assertThat(client.isActive()).as("the writer, its reader not reading").isTrue();
            assertThat(child.isActive()).isTrue();
            child.config().setAutoRead(true);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (read.get() < sent && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(read.get()).isEqualTo(sent);
            assertThat(client.isActive()).isTrue();
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }
}
