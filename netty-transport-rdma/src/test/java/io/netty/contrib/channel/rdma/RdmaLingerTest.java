package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A closed channel keeps its queue pair while what it sent before the close is in flight (it lingers), but not
 * once its peer has disconnected: the peer's queue pair is in ERR then, nothing in flight will be acknowledged,
 * and waiting would hold the queue pair, its receive slots and its ring until the transport's retries ran out.
 */
@Timeout(60)
class RdmaLingerTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void aClosedChannelStopsLingeringWhenItsPeerDisconnects() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new Accepted(accepted))
                    .bind(TestAddress.get(), 0).sync().channel();
            RdmaIoHandlerMetric loop = RdmaIoHandler.metric(server.eventLoop());
            try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
                Channel child = accepted.get(10, TimeUnit.SECONDS);
                peer.stopAnswering();
                // Sent (the promise completes once the bytes are posted), never acknowledged: the close lingers.
                child.writeAndFlush(Unpooled.wrappedBuffer(new byte[100])).sync();
                child.close().sync();
                Thread.sleep(300);
                assertThat(loop.queuePairs()).as("queue pairs while the closed channel lingers").isEqualTo(1);

                long start = System.nanoTime();
                peer.disconnect();
                long deadline = start + TimeUnit.SECONDS.toNanos(2);
                while (loop.queuePairs() != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                // The software device retries an unacknowledged send 8 times, at least 500 ms each: 4 s at least.
                assertThat(loop.queuePairs()).as("queue pairs 2 s after the peer disconnected").isZero();
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @ChannelHandler.Sharable
    private static final class Accepted extends ChannelInboundHandlerAdapter {
        private final CompletableFuture<Channel> accepted;

        Accepted(CompletableFuture<Channel> accepted) {
            this.accepted = accepted;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            accepted.complete(ctx.channel());
        }
    }
}
