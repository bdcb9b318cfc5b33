package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A reader may hold more ring writes than the connection has receive buffers: receive credit comes back as soon
 * as a write's completion is consumed, while its bytes stay in the ring until the reader releases them (gRPC's
 * deframer holds every 16 KiB frame of a message until the message is complete).
 */
@Timeout(60)
class RdmaHeldRingWritesTest {
    private static EventLoopGroup group;

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
    void readerHoldsMoreRingWritesThanReceiveBuffers() throws Exception {
        int writes = 3 * RdmaChannelConfig.DEFAULT_RECEIVE_CREDITS;
        int size = RdmaChannelConfig.DEFAULT_RECEIVE_SLOT_SIZE + 1000; // above the SEND size: a ring write
        long total = (long) writes * size; // 1.7 MiB: under half of the 4 MiB ring, so delivered without a copy
        CompletableFuture<Long> received = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.RECEIVE_ZERO_COPY, true)
                .childOption(RdmaChannelOption.RING_SIZE, 4 << 20)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    private final List<ByteBuf> held = new ArrayList<>();
                    private long bytes;

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        held.add(buf);
                        bytes += buf.readableBytes();
                        if (bytes == total) {
                            held.forEach(ByteBuf::release);
                            received.complete(bytes);
                        }
                    }

                    @Override
                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                        received.completeExceptionally(cause);
                    }
                })
                .bind(TestAddress.get(), 0).sync().channel();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
        for (int i = 0; i < writes; i++) {
            ByteBuf buf = client.alloc().directBuffer(size);
            client.write(buf.writerIndex(size));
        }
        client.flush();
        assertThat(received.get(30, TimeUnit.SECONDS)).isEqualTo(total);
        client.close().sync();
        server.close().sync();
    }
}
