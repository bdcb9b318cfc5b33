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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

@Timeout(60)
class RdmaEchoTest {
    static EventLoopGroup group;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
        group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
    }

    @AfterAll
    static void tearDown() throws Exception {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    @Test
    void echoesBytesAcrossTheSmallLargeBoundary() throws Exception {
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.write(msg);
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        int total = 0;
        Random random = new Random(1);
        int[] sizes = {1, 100, 8184, 8185, 9000, 100_000, 1 << 20, 3 << 20};
        byte[][] messages = new byte[sizes.length][];
        CRC32 sent = new CRC32();
        for (int i = 0; i < sizes.length; i++) {
            messages[i] = new byte[sizes[i]];
            random.nextBytes(messages[i]);
            sent.update(messages[i]);
            total += sizes[i];
        }
        int expected = total;
        CompletableFuture<Long> received = new CompletableFuture<>();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter() {
                    final CRC32 crc = new CRC32();
                    int count;

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        count += buf.readableBytes();
                        crc.update(buf.nioBuffer());
                        buf.release();
                        if (count >= expected) {
                            received.complete(crc.getValue());
                        }
                    }

                    @Override
                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                        received.completeExceptionally(cause);
                    }
                }).connect(server.localAddress()).sync().channel();
        for (byte[] m : messages) {
            client.write(Unpooled.wrappedBuffer(m));
        }
        client.flush();
        assertThat(received.get(30, TimeUnit.SECONDS)).isEqualTo(sent.getValue());
        client.close().sync();
        server.close().sync();
    }
}
