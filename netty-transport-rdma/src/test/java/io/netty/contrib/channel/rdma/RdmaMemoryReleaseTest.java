package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A burst of connections makes the loops' queue groups take receive-slot blocks from the pool (4 credits each
 * side: 400 connections take 25 blocks of 512 KiB a side); once they are gone and the release delay has passed,
 * the slot blocks and the chunks behind them go back: while one connection remains (it uses up, message by
 * message, the receives the others left posted), and again once it is gone too (the shared receive queues are
 * destroyed).
 */
@Timeout(120)
class RdmaMemoryReleaseTest {
    private static final int BURST = 400;

    @Test
    void slotBlocksAndChunksGoBackOnceTheirConnectionsAreGone() throws Exception {
        SoftwareRdma.use();
        RdmaIoHandlerConfig config = new RdmaIoHandlerConfig().memoryReleaseDelayMillis(200);
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
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
            Semaphore echoed = new Semaphore(0);
            Bootstrap bootstrap = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new CountingHandler(echoed));
            RdmaByteBufAllocator alloc = RdmaByteBufAllocator.defaultAllocator();
            Channel survivor = bootstrap.connect(server.localAddress()).sync().channel();
            echo(survivor, echoed, 100);
            long chunksBefore = alloc.metric().chunkCount();
            long usedBefore = alloc.metric().usedDirectMemory();

            List<ChannelFuture> burst = new ArrayList<>();
            for (int i = 0; i < BURST; i++) {
                burst.add(bootstrap.connect(server.localAddress()));
            }
            for (ChannelFuture f : burst) {
                f.sync();
            }
            long chunksDuring = alloc.metric().chunkCount();
            long usedDuring = alloc.metric().usedDirectMemory();
            assertThat(usedDuring - usedBefore).as("slot blocks the burst took (both sides)")
                    .isGreaterThanOrEqualTo(2L * (BURST * 4 / 64) * 64 * 8192);
            assertThat(chunksDuring).as("chunks the burst registered").isGreaterThan(chunksBefore + 4);
            long releasedBefore = alloc.metric().releasedChunks();
            for (ChannelFuture f : burst) {
                f.channel().close();
            }
            for (ChannelFuture f : burst) {
                f.channel().closeFuture().sync();
            }

            // The survivor's messages use up the receives the others left posted (one each), on both sides; then
            // the blocks whose slots are all free go. What stays is the survivor's: a block or two a side, and the
            // chunks they and the loops' caches keep (each in any chunk).
            boolean shrunk = awaitWhileEchoing(survivor, echoed,
                    () -> alloc.metric().usedDirectMemory() < usedBefore + (usedDuring - usedBefore) / 8);
            long chunksSurvivor = alloc.metric().chunkCount();
            long usedSurvivor = alloc.metric().usedDirectMemory();
            assertThat(shrunk).as("slot blocks given back while one connection remains (used %d KiB)",
                    usedSurvivor >> 10).isTrue();
            assertThat(chunksSurvivor).as("chunks while one connection remains").isLessThan(chunksDuring);

            boolean counted = SoftwareRdma.hasObjectCounts();
            long srqsBefore = counted ? SoftwareRdma.objectCounts().get("srq") : 0;
            survivor.close().sync();
            int maxEmpty = alloc.metric().maxEmptyChunks();
            boolean idle = awaitWhileEchoing(null, echoed, () -> alloc.metric().chunkCount() <= chunksBefore + maxEmpty
                    && alloc.metric().usedDirectMemory() < usedBefore
                    && (!counted || SoftwareRdma.objectCounts().get("srq") <= srqsBefore - 2));
            System.out.printf("RdmaMemoryReleaseTest: chunks %d -> %d with %d more connections -> %d with one left"
                            + " -> %d with none; used %d -> %d -> %d -> %d KiB; chunks released %d%n", chunksBefore,
                    chunksDuring, BURST, chunksSurvivor, alloc.metric().chunkCount(), usedBefore >> 10,
                    usedDuring >> 10, usedSurvivor >> 10, alloc.metric().usedDirectMemory() >> 10,
                    alloc.metric().releasedChunks() - releasedBefore);
            assertThat(idle).as("with no connection left: chunks back to %d + maxEmptyChunks (%d), not %d, the slots"
                            + " of both sides and both SRQs gone (used %d KiB)", chunksBefore, maxEmpty,
                    alloc.metric().chunkCount(), alloc.metric().usedDirectMemory() >> 10).isTrue();

            // A group that gave everything back takes connections again.
            Channel again = bootstrap.connect(server.localAddress()).sync().channel();
            echo(again, echoed, 100);
            again.close().sync();
            server.close().sync();
        } finally {
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @io.netty.channel.ChannelHandler.Sharable
    private static final class CountingHandler extends ChannelInboundHandlerAdapter {
        private final Semaphore echoed;

        CountingHandler(Semaphore echoed) {
            this.echoed = echoed;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ((ByteBuf) msg).release();
            echoed.release();
        }
    }

    private static void echo(Channel channel, Semaphore echoed, int messages) throws InterruptedException {
        for (int i = 0; i < messages; i++) {
            channel.writeAndFlush(channel.alloc().directBuffer(64).writeZero(64));
            assertThat(echoed.tryAcquire(10, TimeUnit.SECONDS)).as("echo %d", i).isTrue();
        }
    }

    /** Waits up to 30 s for {@code done}, echoing 100 messages on {@code channel} (if any) between looks. */
    private static boolean awaitWhileEchoing(Channel channel, Semaphore echoed, BooleanSupplier done)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            if (channel != null) {
                echo(channel, echoed, 100);
            }
            Thread.sleep(100);
        }
        return true;
    }
}
