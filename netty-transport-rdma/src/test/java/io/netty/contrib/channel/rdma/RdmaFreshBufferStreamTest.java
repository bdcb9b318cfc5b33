package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.handler.codec.FixedLengthFrameDecoder;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The stream applications write (docs/benchmarks/fresh-buffers.md): each message a fresh {@code ctx.alloc().buffer()}
 * carrying its sequence number, written with its own promise while the channel is writable, a flush every 64
 * writes; the receiver frames the messages with a decoder and checks every sequence number. Small water marks
 * make the writer stop and resume over and over. Nothing is lost, reordered or doubled, every promise succeeds,
 * and the buffers of writes that were copied (64 B messages into SENDs, 1 KiB ones into ring writes once the peer's
 * ring is there) have been released by the time their promise completes; only a write flushed alone is sent
 * from where it lies, its buffer held until the send completes.
 */
@Timeout(120)
class RdmaFreshBufferStreamTest {
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
    void smallMessagesArriveInOrderAndEveryPromiseSucceeds() throws Exception {
        Result r = stream(group, 64, 200_000);
        assertThat(r.ringWrites).as("64 B messages share SENDs").isZero();
        assertThat(r.coalescedWrites).isEqualTo(200_000);
    }

    @Test
    void kibMessagesGoByRingWritesInOrderAndEveryPromiseSucceeds() throws Exception {
        Result r = stream(group, 1024, 50_000);
        // A SEND takes 7 of them: 7143 work requests by SEND alone. Ring writes take up to 63; while the writer is
        // ahead of the slabs the receiver returns, the copies go by SEND rather than wait (here about 2000 work
        // requests in all, 700 of them ring writes).
        assertThat(r.ringWrites).isGreaterThanOrEqualTo(200);
        assertThat(r.coalescedSends).as("work requests of coalesced writes").isLessThanOrEqualTo(5000);
        assertThat(r.coalescedWrites).isEqualTo(50_000);
    }

    /** What a stream did, from the writer's {@link RdmaChannel#metric()}. */
    record Result(long ringWrites, long coalescedWrites, long coalescedSends) {
    }

    /**
     * Streams {@code count} messages of {@code size} bytes as above over a new connection and waits until the
     * receiver has checked them all; fails on a gap, a promise that did not succeed, or a buffer still held when
     * its promise completed.
     */
    static Result stream(EventLoopGroup group, int size, int count) throws Exception {
        CompletableFuture<Long> checked = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new FixedLengthFrameDecoder(size), new ChannelInboundHandlerAdapter() {
                            private long expected;

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf message = (ByteBuf) msg;
                                try {
                                    long number = message.getLong(message.readerIndex());
                                    if (number != expected) {
                                        checked.completeExceptionally(new AssertionError("message " + expected
                                                + " carries sequence number " + number));
                                        ctx.close();
                                        return;
                                    }
                                    if (++expected == count) {
                                        checked.complete(expected);
                                    }
                                } finally {
                                    message.release();
                                }
                            }

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                checked.completeExceptionally(cause);
                                ctx.close();
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            FreshWriter writer = new FreshWriter(size, count);
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(32 << 10, 128 << 10))
                    .handler(writer)
                    .connect(server.localAddress()).sync().channel();
            client.eventLoop().execute(writer::fill);
            assertThat(checked.get(90, TimeUnit.SECONDS)).isEqualTo(count);
            assertThat(writer.succeeded.get() + writer.failed.get()).as("promises completed").isEqualTo(count);
            assertThat(writer.failed.get()).as("promises failed").isZero();
            // A write flushed alone goes from where it lies, its buffer held until the send completes: at most the
            // last of a flush.
            assertThat(writer.held.get()).as("buffers still held when their promise completed")
                    .isLessThanOrEqualTo(count / 64 + 1);
            long[] metric = client.eventLoop().submit(() -> new long[] {
                    client.metric().ringWrites(), client.metric().coalescedWrites(),
                    client.metric().coalescedSends()}).get();
            client.close().sync();
            return new Result(metric[0], metric[1], metric[2]);
        } finally {
            server.close().sync();
        }
    }

    /** Writes fresh sequenced buffers with their own promises while writable, a flush every 64. */
    private static final class FreshWriter extends ChannelInboundHandlerAdapter {
        private final int size;
        private final int count;
        private final AtomicLong succeeded = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private final AtomicLong held = new AtomicLong();
        private ChannelHandlerContext ctx;
        private long sequence;

        FreshWriter(int size, int count) {
            this.size = size;
            this.count = count;
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        void fill() {
            int sinceFlush = 0;
            while (sequence < count && ctx.channel().isWritable()) {
                ByteBuf message = ctx.alloc().buffer(size);
                message.writeLong(sequence++).writerIndex(size);
                ctx.write(message, ctx.newPromise()).addListener((ChannelFutureListener) f -> {
                    if (message.refCnt() != 0) {
                        held.incrementAndGet();
                    }
                    (f.isSuccess() ? succeeded : failed).incrementAndGet();
                });
                if (++sinceFlush == 64) {
                    ctx.flush();
                    sinceFlush = 0;
                }
            }
            ctx.flush();
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            if (ctx.channel().isWritable()) {
                fill();
            }
        }
    }
}
