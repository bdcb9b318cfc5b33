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
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Auto-read as on Netty's NIO and epoll channels: turning it off withdraws a {@code read()} that was asked for and
 * not served yet, so nothing is delivered until the next {@code read()}.
 */
@Timeout(60)
class RdmaAutoReadTest {
    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
    }

    @Test
    void turningAutoReadOffWithdrawsAPendingRead() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<Channel> child = new CompletableFuture<>();
        AtomicInteger read = new AtomicInteger();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    // Auto-read is on: asks for a read, then turns auto-read off before anything came.
                                    ctx.read();
                                    ctx.channel().config().setAutoRead(false);
                                    child.complete(ctx.channel());
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
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            Channel accepted = child.get(10, TimeUnit.SECONDS);
            client.writeAndFlush(Unpooled.directBuffer().writeZero(100)).sync();
            Thread.sleep(300);
            assertThat(read.get()).as("delivered after the read was withdrawn").isZero();
            accepted.read();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (read.get() < 100 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertThat(read.get()).as("delivered on the next read()").isEqualTo(100);
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
