package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Inline sends go unsignalled (SendQueue): no completion per message. What still needs completions gets them: a
 * channel closed right after such sends lingers only until a completion posted behind them comes (not for the
 * linger's 10 s bound), and a send queue as shallow as allowed keeps going (a signalled request always among the
 * outstanding ones). The bytes the server reads are compared with what was written.
 */
@Timeout(60)
class RdmaUnsignaledSendTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void aChannelClosedRightAfterInlineSendsLingersOnlyUntilTheyAreAcknowledged() throws Exception {
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Collector collector = new Collector(5 * 40);
        try {
            Channel server = serverBootstrap(serverGroup, collector).bind(TestAddress.get(), 0).sync().channel();
            Channel client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            RdmaIoHandlerMetric loop = RdmaIoHandler.metric(client.eventLoop());
            byte[] sent = new byte[5 * 40];
            for (int i = 0; i < sent.length; i++) {
                sent[i] = (byte) (i * 7);
            }
            // Five flushes of 40 B: each its own inline SEND, none signalled. A write's promise succeeds once it is
            // posted (the first ones wait for the credits the server grants), so the close comes right behind the
            // last send, with no completion on its way.
            ChannelFuture[] writes = new ChannelFuture[5];
            for (int i = 0; i < 5; i++) {
                writes[i] = client.writeAndFlush(Unpooled.wrappedBuffer(sent, i * 40, 40));
            }
            for (ChannelFuture write : writes) {
                write.sync();
            }
            client.close().sync();
            assertThat(collector.bytes.get(10, TimeUnit.SECONDS)).isEqualTo(sent);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (loop.queuePairs() != 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertThat(loop.queuePairs()).as("client queue pairs 5 s after the close (the linger's bound is 10 s)")
                    .isZero();
            server.close().sync();
        } finally {
            clientGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void theShallowestSendQueueKeepsSendingInlineMessages() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        int count = 3000;
        int size = 32;
        Collector collector = new Collector(count * size);
        try {
            Channel server = serverBootstrap(group, collector).bind(TestAddress.get(), 0).sync().channel();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.SEND_QUEUE_DEPTH, 4)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            byte[] sent = new byte[count * size];
            for (int i = 0; i < sent.length; i++) {
                sent[i] = (byte) (i * 31 + i / size);
            }
            // Each write flushed alone: one inline SEND each, four in flight at most.
            for (int i = 0; i < count; i++) {
                client.writeAndFlush(Unpooled.wrappedBuffer(sent, i * size, size));
            }
            assertThat(collector.bytes.get(30, TimeUnit.SECONDS)).isEqualTo(sent);
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    private static ServerBootstrap serverBootstrap(EventLoopGroup group, Collector collector) {
        return new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(collector);
                    }
                });
    }

    /** Collects what one connection reads, until {@code expected} bytes. */
    @io.netty.channel.ChannelHandler.Sharable
    private static final class Collector extends ChannelInboundHandlerAdapter {
        final CompletableFuture<byte[]> bytes = new CompletableFuture<>();
        private final ByteArrayOutputStream received = new ByteArrayOutputStream();
        private final int expected;

        Collector(int expected) {
            this.expected = expected;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                byte[] b = new byte[buf.readableBytes()];
                buf.readBytes(b);
                received.writeBytes(b);
            } finally {
                buf.release();
            }
            if (received.size() >= expected) {
                bytes.complete(received.toByteArray());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            bytes.completeExceptionally(cause);
        }
    }
}
