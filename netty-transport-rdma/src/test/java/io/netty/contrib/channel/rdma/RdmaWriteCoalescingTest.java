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
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Small writes of one flush travel copied together in as few SENDs as fit the peer's receive slot, in order with
 * the large writes (ring writes), file regions and heap buffers between them; every write's promise succeeds; a
 * threshold of 0 sends each write as its own message. The bytes the server reads are compared with what was
 * written, byte for byte.
 */
@Timeout(60)
class RdmaWriteCoalescingTest {
    static EventLoopGroup group;

    @TempDir
    Path dir;

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
    void smallWritesOfOneFlushShareSends() throws Exception {
        Result r = transfer(RdmaChannelConfig.DEFAULT_WRITE_COALESCE_THRESHOLD, 2000, 64, false);
        assertThat(r.received).isEqualTo(r.sent);
        // 2000 writes of 64 B: about 127 fit one 8 KiB receive slot.
        assertThat(r.coalescedWrites).isEqualTo(2000);
        assertThat(r.coalescedSends).isLessThanOrEqualTo(2000 / 100);
        // Writes this small share a SEND by the hundred: no ring is asked for.
        assertThat(r.ringWrites).isZero();
        assertThat(r.heldAtCompletion).as("buffers still held when their promise completed").isZero();
    }

    /**
     * A backlog of 1 KiB writes (the fresh-buffer stream's): a SEND would take 7 of them, so once the peer's
     * ring is there (the first SENDs ask for it) they are copied into ring writes of up to a 64 KiB slab, 63
     * each. Every write's buffer is released by the time its promise completes: the copy is what is sent.
     */
    @Test
    void kibWritesOfABacklogAreCopiedIntoRingWrites() throws Exception {
        Result r = transfer(RdmaChannelConfig.DEFAULT_WRITE_COALESCE_THRESHOLD, 4000, 1024, false);
        assertThat(r.received).isEqualTo(r.sent);
        assertThat(r.coalescedWrites).isEqualTo(4000);
        // Until the ring arrives (a round trip), SENDs of 7 writes each, at most one per receive credit (64); then
        // up to a slab of writes per ring write (a 4 MiB ring's slab is 256 KiB: 255 writes): at least
        // (4000 - 64 * 7) / 255 = 13 of them, where SENDs alone would be 572.
        assertThat(r.ringWrites).isGreaterThanOrEqualTo(13);
        assertThat(r.coalescedSends - r.ringWrites).as("coalesced SENDs").isLessThanOrEqualTo(64);
        assertThat(r.heldAtCompletion).as("buffers still held when their promise completed").isZero();
    }

    /**
     * Once the peer's ring is there, a backlog of 1 KiB writes three times its size (12 MiB in one flush, a 4 MiB
     * ring) waits for slabs to come back whenever the ring is full: every byte goes by ring writes, none by SENDs of
     * 7 writes each, which would take the receive credits the ring writes need and cost the reader a copy per
     * receive slot. Every byte arrives in order. (Where the ring was withdrawn as idle meanwhile, the SENDs that asked
     * for a new one are bounded instead.)
     */
    @Test
    void kibWritesWaitForTheRingWhenItIsFull() throws Exception {
        AtomicLong receivedBytes = new AtomicLong();
        AtomicReference<String> mismatch = new AtomicReference<>();
        AtomicReference<RdmaChannel> child = new AtomicReference<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        child.set((RdmaChannel) ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            private long offset;

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf buf = (ByteBuf) msg;
                                byte[] got = new byte[buf.readableBytes()];
                                buf.readBytes(got);
                                buf.release();
                                // Byte k of write i is (byte) (i + k): a byte out of place or order shows.
                                for (byte b : got) {
                                    byte want = (byte) (offset / 1024 + offset % 1024);
                                    if (b != want && mismatch.get() == null) {
                                        mismatch.set("byte " + offset + ": " + b + ", expected " + want);
                                    }
                                    offset++;
                                }
                                receivedBytes.addAndGet(got.length);
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            int warmup = 1000;
            int backlog = 3 * RdmaChannelConfig.DEFAULT_RING_SIZE / 1024;
            int[] filled = {0};
            java.util.function.Supplier<ByteBuf> next = () -> {
                ByteBuf b = client.alloc().directBuffer(1024);
                for (int k = 0; k < 1024; k++) {
                    b.writeByte(filled[0] + k);
                }
                filled[0]++;
                return b;
            };
            // The backlog is written in the loop task that sees the ring there, its buffers filled beforehand: an
            // idle ring is withdrawn after a second, and then the first writes would go by SENDs asking for one.
            CompletableFuture<long[]> backlogWritten = new CompletableFuture<>();
            List<ByteBuf> prepared = new ArrayList<>();
            Runnable[] whenRing = new Runnable[1];
            whenRing[0] = () -> {
                if (client.metric().ringWrites() == 0) {
                    client.eventLoop().schedule(whenRing[0], 1, TimeUnit.MILLISECONDS);
                    return;
                }
                long[] before = {client.metric().ringWrites(), client.metric().coalescedSends(),
                        child.get().metric().ringsWithdrawn()};
                for (ByteBuf b : prepared) {
                    client.write(b);
                }
                client.flush();
                backlogWritten.complete(before);
            };
            client.eventLoop().execute(() -> {
                List<ByteBuf> first = new ArrayList<>();
                for (int i = 0; i < warmup; i++) {
                    first.add(next.get());
                }
                for (int i = 0; i < backlog; i++) {
                    prepared.add(next.get());
                }
                for (ByteBuf b : first) {
                    client.write(b);
                }
                client.flush();
                whenRing[0].run();
            });
            long[] before = backlogWritten.get(20, TimeUnit.SECONDS);
            long total = (long) (warmup + backlog) * 1024;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (receivedBytes.get() < total && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(receivedBytes.get()).isEqualTo(total);
            assertThat(mismatch.get()).isNull();
            long[] after = client.eventLoop().submit(() -> new long[] {
                    client.metric().ringWrites(), client.metric().coalescedSends()}).get();
            RdmaChannel reader = child.get();
            long withdrawn = reader.eventLoop().submit(() -> reader.metric().ringsWithdrawn()).get() - before[2];
            long ringWrites = after[0] - before[0];
            long sends = after[1] - before[1] - ringWrites;
            if (withdrawn == 0) {
                // 12 MiB in slabs of 256 KiB: at least 48 ring writes (more where a flush ended in a slab).
                assertThat(ringWrites).isGreaterThanOrEqualTo(48);
                assertThat(sends).as("SENDs of the backlog").isZero();
            } else {
                // A ring nothing was written to for a second is withdrawn as idle (a writer slowed down that much:
                // PARANOID leak detection, emulation); then SENDs asking for a ring go, one per receive credit at
                // most, until it comes back.
                assertThat(sends).as("SENDs of the backlog, the ring withdrawn %d times", withdrawn)
                        .isLessThanOrEqualTo(withdrawn * RdmaChannelConfig.DEFAULT_RECEIVE_CREDITS);
            }
            client.close().sync();
        } finally {
            server.close().sync();
        }
    }

    @Test
    void smallWritesKeepTheirOrderAmongLargeWritesAndFileRegions() throws Exception {
        Result r = transfer(RdmaChannelConfig.DEFAULT_WRITE_COALESCE_THRESHOLD, 600, 0, true);
        assertThat(r.received).isEqualTo(r.sent);
        assertThat(r.coalescedWrites).isGreaterThan(100);
    }

    /**
     * HTTP/2's shape (gRPC): a 9-byte frame header, then a 16 KiB frame, over and over. Once the peer offers its
     * ring, headers and frames are gathered from where they lie into ring writes of up to 8 buffers: 4 frames
     * per work request, where a work request per frame (or two) would be 200.
     */
    @Test
    void http2FramesAreGatheredIntoFewRingWrites() throws Exception {
        int[] sizes = new int[400];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = i % 2 == 0 ? 9 : 16384;
        }
        Result r = transfer(RdmaChannelConfig.DEFAULT_WRITE_COALESCE_THRESHOLD, sizes, false);
        assertThat(r.received).isEqualTo(r.sent);
        // Before the ring arrives the first frames go by SENDs of a receive slot each; from then on 4 frames with
        // their headers per ring write (fewer on a device with fewer SGEs than 8: not these).
        assertThat(r.ringWrites).isBetween(45L, 60L);
        // A header whose frame has to wait (for credit, or for a slab the receiver has not returned yet: protocol 4
        // returns slabs once they are invalidated, delivered and released) is copied to ride at the head of the
        // frame's ring write when the writer resumes: at most every header once.
        assertThat(r.coalescedWrites).isLessThanOrEqualTo(100);
    }

    /**
     * A stream of 4 KiB writes (above the coalescing threshold, within a receive slot): the backlog asks the peer
     * for a ring, and from then on the writes are gathered from where they lie, 8 per ring write, where a SEND
     * each would be 400 work requests and 400 credits.
     */
    @Test
    void midSizeWritesAreGatheredIntoRingWrites() throws Exception {
        Result r = transfer(RdmaChannelConfig.DEFAULT_WRITE_COALESCE_THRESHOLD, 400, 4096, false);
        assertThat(r.received).isEqualTo(r.sent);
        // The first writes go by SEND until the ring arrives (a round trip); then 8 writes per ring write.
        assertThat(r.ringWrites).isBetween(30L, 50L);
        assertThat(r.coalescedWrites).isZero();
    }

    @Test
    void thresholdZeroSendsEachWriteAlone() throws Exception {
        Result r = transfer(0, 500, 64, false);
        assertThat(r.received).isEqualTo(r.sent);
        assertThat(r.coalescedWrites).isZero();
    }

    /**
     * A listener that closes the channel when a coalesced write's promise completes: what was written up to it
     * still reaches the peer (the channel lingers until the send that carries it completes), in order.
     */
    @Test
    void closeFromAListenerOfACoalescedWriteLosesNothingWrittenBeforeIt() throws Exception {
        CompletableFuture<byte[]> received = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            private final ByteArrayOutputStream in = new ByteArrayOutputStream();

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf buf = (ByteBuf) msg;
                                byte[] b = new byte[buf.readableBytes()];
                                buf.readBytes(b);
                                buf.release();
                                in.writeBytes(b);
                            }

                            @Override
                            public void channelInactive(ChannelHandlerContext ctx) {
                                received.complete(in.toByteArray());
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            ByteArrayOutputStream expected = new ByteArrayOutputStream();
            List<ChannelFuture> before = new ArrayList<>();
            client.eventLoop().submit(() -> {
                for (int i = 0; i < 50; i++) {
                    byte[] b = new byte[100];
                    java.util.Arrays.fill(b, (byte) i);
                    expected.writeBytes(b);
                    ChannelFuture f = client.write(client.alloc().directBuffer(100).writeBytes(b));
                    before.add(f);
                    if (i == 29) {
                        f.addListener(io.netty.channel.ChannelFutureListener.CLOSE);
                    }
                }
                client.flush();
                return null;
            }).sync();
            byte[] got = received.get(20, TimeUnit.SECONDS);
            byte[] upToClose = java.util.Arrays.copyOf(expected.toByteArray(), 30 * 100);
            assertThat(got.length).isGreaterThanOrEqualTo(upToClose.length);
            assertThat(java.util.Arrays.copyOf(got, upToClose.length)).isEqualTo(upToClose);
            for (int i = 0; i < 30; i++) {
                assertThat(before.get(i).await(5, TimeUnit.SECONDS)).isTrue();
                assertThat(before.get(i).isSuccess()).as("write %d", i).isTrue();
            }
            client.closeFuture().sync();
        } finally {
            server.close().sync();
        }
    }

    /**
     * The same on the ring path: after a stream of 1 KiB writes that got the peer's ring, 200 more in one flush,
     * copied into ring writes, the listener of the 121st closing the channel. Exactly the writes up to it reach the
     * peer: the copies of those after it, whose promises fail, are not sent.
     */
    @Test
    void closeFromAListenerOfARingCoalescedWriteSendsExactlyTheWritesBeforeIt() throws Exception {
        CompletableFuture<byte[]> received = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            private final ByteArrayOutputStream in = new ByteArrayOutputStream();

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf buf = (ByteBuf) msg;
                                byte[] b = new byte[buf.readableBytes()];
                                buf.readBytes(b);
                                buf.release();
                                in.writeBytes(b);
                            }

                            @Override
                            public void channelInactive(ChannelHandlerContext ctx) {
                                received.complete(in.toByteArray());
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            ByteArrayOutputStream expected = new ByteArrayOutputStream();
            int warmup = 1000;
            List<ChannelFuture> writes = new ArrayList<>();
            Runnable write = () -> {
                byte[] b = new byte[1024];
                java.util.Arrays.fill(b, (byte) writes.size());
                b[0] = (byte) (writes.size() >> 8);
                expected.writeBytes(b);
                writes.add(client.write(client.alloc().directBuffer(1024).writeBytes(b)));
            };
            client.eventLoop().submit(() -> {
                for (int i = 0; i < warmup; i++) {
                    write.run();
                }
                client.flush();
            }).sync();
            for (ChannelFuture f : writes) {
                assertThat(f.await(10, TimeUnit.SECONDS)).isTrue();
            }
            long ringWritesBefore = client.eventLoop().submit(() -> client.metric().ringWrites()).get();
            assertThat(ringWritesBefore).as("the ring is there").isPositive();
            client.eventLoop().submit(() -> {
                for (int i = 0; i < 200; i++) {
                    write.run();
                    if (i == 120) {
                        writes.getLast().addListener(io.netty.channel.ChannelFutureListener.CLOSE);
                    }
                }
                client.flush();
            }).sync();
            byte[] got = received.get(20, TimeUnit.SECONDS);
            int upToClose = (warmup + 121) * 1024;
            assertThat(got.length).isEqualTo(upToClose);
            assertThat(got).isEqualTo(java.util.Arrays.copyOf(expected.toByteArray(), upToClose));
            for (int i = 0; i < writes.size(); i++) {
                assertThat(writes.get(i).await(5, TimeUnit.SECONDS)).isTrue();
                assertThat(writes.get(i).isSuccess()).as("write %d succeeded", i).isEqualTo(i < warmup + 121);
            }
            long ringWrites = client.metric().ringWrites();
            assertThat(ringWrites).as("ring writes of the last flush").isGreaterThan(ringWritesBefore);
            client.closeFuture().sync();
        } finally {
            server.close().sync();
        }
    }

    /**
     * {@code heldAtCompletion}: direct buffers of at most the threshold's size still referenced when their
     * write's promise completed (a copied write's buffer is released first; one sent from where it lies is held).
     */
    private record Result(byte[] sent, byte[] received, long coalescedWrites, long coalescedSends, long ringWrites,
                          int heldAtCompletion) {
    }

    /**
     * Writes {@code count} messages in one flush: all of {@code size} bytes, or (size 0) random sizes from 0 B to
     * 3 KiB with, now and then, a 20-200 KiB write (a ring write), a heap buffer or a file region between them.
     */
    private Result transfer(int threshold, int count, int size, boolean mixed) throws Exception {
        Random random = new Random(7);
        int[] sizes = new int[count];
        for (int i = 0; i < count; i++) {
            sizes[i] = size > 0 ? size : random.nextInt(20) == 0 ? 20_000 + random.nextInt(180_000)
                    : random.nextInt(3073);
        }
        return transfer(threshold, sizes, mixed);
    }

    /** Writes messages of {@code sizes} in one flush; {@code mixed}: some as heap buffers or file regions. */
    private Result transfer(int threshold, int[] sizes, boolean mixed) throws Exception {
        CompletableFuture<byte[]> received = new CompletableFuture<>();
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        Random random = new Random(7);
        List<byte[]> writes = new ArrayList<>();
        for (int n : sizes) {
            byte[] b = new byte[n];
            random.nextBytes(b);
            writes.add(b);
            expected.writeBytes(b);
        }
        int total = expected.size();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            private final ByteArrayOutputStream in = new ByteArrayOutputStream();

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf buf = (ByteBuf) msg;
                                byte[] b = new byte[buf.readableBytes()];
                                buf.readBytes(b);
                                buf.release();
                                in.writeBytes(b);
                                if (in.size() >= total) {
                                    received.complete(in.toByteArray());
                                }
                            }

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                received.completeExceptionally(cause);
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try {
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.WRITE_COALESCE_THRESHOLD, threshold)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            List<ChannelFuture> futures = new ArrayList<>();
            java.util.concurrent.atomic.AtomicInteger held = new java.util.concurrent.atomic.AtomicInteger();
            client.eventLoop().submit(() -> {
                for (int i = 0; i < writes.size(); i++) {
                    byte[] b = writes.get(i);
                    Object msg;
                    if (mixed && i % 17 == 5) {
                        Path file = Files.write(dir.resolve("part-" + i), b);
                        msg = new DefaultFileRegion(file.toFile(), 0, b.length);
                    } else if (mixed && i % 13 == 3) {
                        msg = Unpooled.wrappedBuffer(b); // heap: copied into registered memory
                    } else {
                        msg = client.alloc().directBuffer(b.length).writeBytes(b);
                    }
                    ChannelFuture f = client.write(msg);
                    if (msg instanceof ByteBuf buf && buf.isDirect() && b.length <= threshold) {
                        f.addListener(done -> {
                            if (buf.refCnt() != 0) {
                                held.incrementAndGet();
                            }
                        });
                    }
                    futures.add(f);
                }
                client.flush();
                return null;
            }).sync();
            byte[] got = received.get(30, TimeUnit.SECONDS);
            for (ChannelFuture f : futures) {
                assertThat(f.await(10, TimeUnit.SECONDS)).isTrue();
                assertThat(f.cause()).isNull();
            }
            long[] counts = client.eventLoop().submit(() -> new long[] {
                    client.metric().coalescedWrites(), client.metric().coalescedSends(),
                    client.metric().ringWrites()}).get();
            client.close().sync();
            return new Result(expected.toByteArray(), got, counts[0], counts[1], counts[2], held.get());
        } finally {
            server.close().sync();
        }
    }
}
