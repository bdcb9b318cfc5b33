package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
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

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A loop shut down with a quiet period of 0 while channels are still open closes them the way a close does: their
 * close futures complete and their handlers hear channelInactive and channelUnregistered. Netty's loop can leave
 * its run loop without calling {@code prepareToDestroy()} (the shutdown began after its check, and a quiet period
 * of 0 ends it at the next {@code confirmShutdown()}); closed only in {@code destroy()}, when the loop takes no more
 * tasks, the channels could not be deregistered. Repeated, because that moment is a race.
 */
@Timeout(120)
class RdmaLoopShutdownTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void channelsOpenAtAnImmediateShutdownAreClosedWithTheirEvents() throws Exception {
        for (int round = 0; round < 12; round++) {
            // Odd rounds busy-poll: the loop's iterations are shortest then, and the race most likely.
            EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, round % 2 == 0 ? RdmaIoHandler.newFactory()
                    : RdmaIoHandler.newFactory(RdmaIoHandlerConfig.spinning()));
            Events child = new Events();
            Events client = new Events();
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(child)
                    .bind(TestAddress.get(), 0).sync().channel();
            Channel ch = new Bootstrap().group(group).channel(RdmaChannel.class).handler(client)
                    .connect(server.localAddress()).sync().channel();
            ch.writeAndFlush(Unpooled.wrappedBuffer(new byte[64])).sync();
            child.read.get(10, TimeUnit.SECONDS);

            // No close first: the loop's shutdown closes the client, the server's child and the server.
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();

            assertThat(ch.closeFuture().isDone()).as("round %d: client closed", round).isTrue();
            assertThat(server.closeFuture().isDone()).as("round %d: server closed", round).isTrue();
            assertThat(client.inactive).as("round %d: client channelInactive", round).isCompleted();
            assertThat(client.unregistered).as("round %d: client channelUnregistered", round).isCompleted();
            assertThat(child.inactive).as("round %d: child channelInactive", round).isCompleted();
            assertThat(child.unregistered).as("round %d: child channelUnregistered", round).isCompleted();
        }
    }

    @ChannelHandler.Sharable
    private static final class Events extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Void> read = new CompletableFuture<>();
        final CompletableFuture<Void> inactive = new CompletableFuture<>();
        final CompletableFuture<Void> unregistered = new CompletableFuture<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ((ByteBuf) msg).release();
            read.complete(null);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            inactive.complete(null);
        }

        @Override
        public void channelUnregistered(ChannelHandlerContext ctx) {
            unregistered.complete(null);
        }
    }
}
