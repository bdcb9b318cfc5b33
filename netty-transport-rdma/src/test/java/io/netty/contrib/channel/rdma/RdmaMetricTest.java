package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The channel and loop counters say what happened: the bytes both ways, SENDs and ring writes, coalesced writes,
 * a ring offered for large messages, copies into the allocator, credit stalls when the reader does not read, and
 * the loop's polls, completions and sleeps. Counts, compared with what the test did; nothing timed.
 */
@Timeout(60)
class RdmaMetricTest {
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
    void countersFollowTraffic() throws Exception {
        long total = 100 * 64 + 300_000;
        AtomicLong serverRead = new AtomicLong();
        CompletableFuture<Void> all = new CompletableFuture<>();
        AtomicReference<RdmaChannel> child = new AtomicReference<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        child.set((RdmaChannel) ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                if (serverRead.addAndGet(((ByteBuf) msg).readableBytes()) == total) {
                                    all.complete(null);
                                }
                                ((ByteBuf) msg).release();
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            assertThat(client.metric().bytesWritten()).isZero();
            client.eventLoop().submit(() -> {
                for (int i = 0; i < 100; i++) {
                    client.write(client.alloc().directBuffer(64).writerIndex(64));
                }
                client.flush();
                // large: by SENDs flagged WANTS_RING at first, then ring writes once the server offers its ring
                for (int i = 0; i < 3; i++) {
                    client.writeAndFlush(client.alloc().directBuffer(100_000).writerIndex(100_000));
                }
            }).sync();
            all.get(20, TimeUnit.SECONDS);
            RdmaChannelMetric sent = client.eventLoop().submit(client::metric).get();
            RdmaChannelMetric got = child.get().eventLoop().submit(() -> child.get().metric()).get();
            assertThat(sent.bytesWritten()).isEqualTo(total);
            assertThat(got.bytesRead()).isEqualTo(total);
            assertThat(sent.coalescedWrites()).isEqualTo(100);
            assertThat(sent.coalescedSends()).isBetween(1L, 2L);
            assertThat(sent.sends() + sent.ringWrites()).isGreaterThanOrEqualTo(3);
            assertThat(got.ringsOffered()).isEqualTo(1);
            // The coalesced SEND (6 400 bytes, at least a quarter of a slot) and the ring writes (100 000 bytes) are
            // handed over without a copy, by default (copies: RdmaLentSlotTest).
            assertThat(got.zeroCopyBuffers()).isGreaterThanOrEqualTo(2);
            assertThat(got.copies()).isLessThanOrEqualTo(1);
            assertThat(sent.toString()).contains("bytesWritten=" + total);

            RdmaIoHandlerMetric loop = RdmaIoHandler.metric(client.eventLoop());
            long completions = client.eventLoop().submit(loop::completions).get();
            assertThat(completions).isPositive();
            assertThat(loop.polls()).isGreaterThanOrEqualTo(loop.emptyPolls());
            assertThat(loop.queueGroups()).isPositive();
            assertThat(loop.queuePairs()).isPositive();
            long entries = loop.completionQueueEntries();
            long reserved = loop.completionQueueReserved();
            long granted = loop.receiveCreditsGranted();
            assertThat(reserved).isPositive().isLessThanOrEqualTo(entries);
            assertThat(granted).isPositive();
            client.close().sync();
            // the connection left its queue group: its send queue and its grant are no longer reserved
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (loop.completionQueueReserved() == reserved && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertThat(loop.completionQueueReserved()).isLessThan(reserved);
            assertThat(loop.receiveCreditsGranted()).isLessThan(granted);
            // the counters outlive the connection
            assertThat(client.metric().bytesWritten()).isEqualTo(total);
        } finally {
            server.close().sync();
        }
    }

    /** A reader that does not read leaves the writer without credit: a stall, counted, with its time once over. */
    @Test
    void creditStallsAreCountedAndTimed() throws Exception {
        AtomicReference<Channel> child = new AtomicReference<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(io.netty.channel.ChannelOption.AUTO_READ, false)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        child.set(ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ((ByteBuf) msg).release();
                                ctx.read();
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.WRITE_COALESCE_THRESHOLD, 0)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            // 4 credits at first, one in reserve: the 4th write waits until the server reads
            io.netty.channel.ChannelFuture last = null;
            for (int i = 0; i < 10; i++) {
                last = client.writeAndFlush(client.alloc().directBuffer(1000).writerIndex(1000));
            }
            while (client.eventLoop().submit(() -> client.metric().creditStalls()).get() == 0) {
                Thread.sleep(10);
            }
            Thread.sleep(50);
            child.get().read();
            assertThat(last.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(last.isSuccess()).isTrue();
            RdmaChannelMetric m = client.eventLoop().submit(client::metric).get();
            assertThat(m.creditStalls()).isPositive();
            assertThat(m.creditStallNanos()).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(50));
            assertThat(m.sends()).isEqualTo(10);
            client.close().sync();
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aLoopThatIsNotRdmasHasNoMetric() throws Exception {
        EventLoopGroup nio = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        try {
            assertThatThrownBy(() -> RdmaIoHandler.metric(nio.next())).isInstanceOf(IllegalArgumentException.class);
        } finally {
            nio.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }
}
