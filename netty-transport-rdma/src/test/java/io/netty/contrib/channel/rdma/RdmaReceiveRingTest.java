package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * With {@link RdmaChannelOption#RECEIVE_ZERO_COPY}, ring writes reach the reader as buffers over the receive ring
 * (no copy) while the reader holds buffers over at most half of the ring's slabs, and as copies beyond that;
 * releasing a buffer, on any thread, returns its slab to the writer.
 */
@Timeout(120)
class RdmaReceiveRingTest {
    private static final int MIB = 1 << 20;
    /** A write that makes the receiver offer its ring, and that the tests then ignore. */
    private static final int WARM_UP = 3 * MIB;
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
    void largeWriteArrivesAsOneBufferOverTheRing() throws Exception {
        List<Integer> sizes = new ArrayList<>();
        CompletableFuture<Long> crc = new CompletableFuture<>();
        Channel server = server(() -> new ChannelInboundHandlerAdapter() {
            final CRC32 sum = new CRC32();
            long bytes;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf buf = (ByteBuf) msg;
                sizes.add(buf.readableBytes());
                bytes += buf.readableBytes();
                sum.update(buf.nioBuffer());
                buf.release();
                if (bytes == WARM_UP) {
                    bytes = 0;
                    sum.reset();
                    sizes.clear();
                } else if (bytes == MIB) {
                    crc.complete(sum.getValue());
                }
            }
        });
        byte[] message = random(MIB, 1);
        Channel client = client(server);
        // The first large write asks for a ring (its first part goes by SEND); the second finds it.
        ringOffered(client);
        client.writeAndFlush(Unpooled.wrappedBuffer(message));
        assertThat(crc.get(30, TimeUnit.SECONDS)).isEqualTo(crc(message));
        // The ring takes writes of up to a slab, a sixteenth of its 4 MiB: four writes, four buffers, no copy.
        assertThat(sizes).containsExactly(MIB / 4, MIB / 4, MIB / 4, MIB / 4);
        client.close().sync();
        server.close().sync();
    }

    @Test
    void readerHoldingMoreThanTheRingStillReceivesEverything() throws Exception {
        holdMoreThanARing(group);
    }

    /** A reader that keeps every buffer until 24 MiB (six rings) arrived still gets them all. */
    static void holdMoreThanARing(EventLoopGroup group) throws Exception {
        int total = 24 * MIB;  // six rings' worth, all held until the last byte arrived
        List<Integer> sizes = new ArrayList<>();
        CompletableFuture<Long> crc = new CompletableFuture<>();
        Channel server = server(group, () -> new ChannelInboundHandlerAdapter() {
            CompositeByteBuf held;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                if (held == null) {
                    held = ctx.alloc().compositeBuffer(Integer.MAX_VALUE);
                }
                ByteBuf buf = (ByteBuf) msg;
                sizes.add(buf.readableBytes());
                held.addComponent(true, buf);
                if (held.readableBytes() == total) {
                    CRC32 sum = new CRC32();
                    for (ByteBuffer b : held.nioBuffers()) {
                        sum.update(b);
                    }
                    held.release();
                    crc.complete(sum.getValue());
                }
            }
        });
        byte[] message = random(total, 2);
        Channel client = client(group, server);
        client.writeAndFlush(Unpooled.wrappedBuffer(message));
        assertThat(crc.get(60, TimeUnit.SECONDS)).isEqualTo(crc(message));
        // Up to half the ring's slabs were handed out in place (a slab each); the rest was copied so the writer
        // could go on.
        assertThat(sizes).contains(MIB / 4);
        assertThat(sizes).anyMatch(size -> size < MIB / 4);
        client.close().sync();
        server.close().sync();
    }

    @Test
    void buffersReleasedOnAnotherThreadReturnRingSpace() throws Exception {
        int total = 64 * MIB;
        ExecutorService releaser = Executors.newSingleThreadExecutor();
        CompletableFuture<Long> crc = new CompletableFuture<>();
        try {
            Channel server = server(() -> new ChannelInboundHandlerAdapter() {
                final CRC32 sum = new CRC32();
                long bytes;

                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    ByteBuf buf = (ByteBuf) msg;
                    sum.update(buf.nioBuffer());
                    bytes += buf.readableBytes();
                    if (bytes == total) {
                        crc.complete(sum.getValue());
                    }
                    releaser.execute(() -> {
                        sleepQuietly();
                        buf.release();
                    });
                }
            });
            byte[] message = random(MIB, 3);
            Channel client = client(server);
            CRC32 sent = new CRC32();
            for (int i = 0; i < total / MIB; i++) {
                client.write(Unpooled.wrappedBuffer(message));
                sent.update(message);
            }
            client.flush();
            assertThat(crc.get(60, TimeUnit.SECONDS)).isEqualTo(sent.getValue());
            client.close().sync();
            server.close().sync();
        } finally {
            releaser.shutdown();
            assertThat(releaser.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
        }
    }

    @Test
    void bufferHeldAfterThePeerClosedStaysReadableAndIsFreedOnRelease() throws Exception {
        CompletableFuture<ByteBuf> kept = new CompletableFuture<>();
        CompletableFuture<Void> inactive = new CompletableFuture<>();
        Channel server = server(() -> new ChannelInboundHandlerAdapter() {
            long bytes;

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf buf = (ByteBuf) msg;
                bytes += buf.readableBytes();
                if (bytes > WARM_UP) {
                    kept.complete(buf);  // the first buffer after the warm-up: over the ring
                } else {
                    buf.release();
                }
            }

            @Override
            public void channelInactive(ChannelHandlerContext ctx) {
                inactive.complete(null);
            }
        });
        byte[] message = random(MIB, 4);
        Channel client = client(server);
        ringOffered(client);
        client.writeAndFlush(Unpooled.wrappedBuffer(message)).sync();
        ByteBuf buf = kept.get(30, TimeUnit.SECONDS);
        client.close().sync();
        inactive.get(30, TimeUnit.SECONDS);
        long mrs = SoftwareRdma.objectCounts().get("mr");
        // The connections are gone; the ring under the buffer (the message's first slab) is not.
        assertThat(buf.readableBytes()).isEqualTo(MIB / 4);
        CRC32 sum = new CRC32();
        sum.update(buf.nioBuffer());
        assertThat(sum.getValue()).isEqualTo(crc(java.util.Arrays.copyOf(message, MIB / 4)));
        buf.release();
        // Its ring goes with it (and possibly an empty pool chunk the closed connections left).
        awaitMrCountAtMost(mrs - 1);
        server.close().sync();
    }

    @Test
    void bothSidesWritingOnlyRingWritesWithFewReceiveBuffersNeverWaitForEachOther() throws Exception {
        // Ring writes carry no credits, and with four receive buffers one is the CREDIT reserve: every credit
        // comes back in CREDIT messages, which must go out whenever the other side may be starved.
        int total = 32 * MIB;
        int size = 64 << 10;
        CompletableFuture<Long> serverGot = new CompletableFuture<>();
        CompletableFuture<Long> clientGot = new CompletableFuture<>();
        byte[] message = random(size, 5);
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.RECEIVE_CREDITS, 4)
                .childOption(RdmaChannelOption.RING_SIZE, 1 << 20)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new Counter(total, serverGot) {
                            @Override
                            public void channelActive(ChannelHandlerContext ctx) {
                                writeAll(ctx.channel(), message, total);
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .option(RdmaChannelOption.RECEIVE_CREDITS, 4)
                .option(RdmaChannelOption.RING_SIZE, 1 << 20)
                .handler(new Counter(total, clientGot))
                .connect(server.localAddress()).sync().channel();
        writeAll(client, message, total);
        CRC32 expected = new CRC32();
        for (int i = 0; i < total / size; i++) {
            expected.update(message);
        }
        assertThat(serverGot.get(60, TimeUnit.SECONDS)).isEqualTo(expected.getValue());
        assertThat(clientGot.get(60, TimeUnit.SECONDS)).isEqualTo(expected.getValue());
        client.close().sync();
        server.close().sync();
    }

    /** Writes {@value #WARM_UP} bytes the reader ignores: the receiver offers its ring meanwhile. */
    private static void ringOffered(Channel client) throws InterruptedException {
        client.writeAndFlush(Unpooled.wrappedBuffer(new byte[WARM_UP])).sync();
    }

    private static void writeAll(Channel channel, byte[] message, int total) {
        for (int sent = 0; sent < total; sent += message.length) {
            channel.write(Unpooled.wrappedBuffer(message));
        }
        channel.flush();
    }

    /** Sums the CRC of what arrives; completes with it after {@code total} bytes. */
    private static class Counter extends ChannelInboundHandlerAdapter {
        private final CRC32 sum = new CRC32();
        private final long total;
        private final CompletableFuture<Long> done;
        private long bytes;

        Counter(long total, CompletableFuture<Long> done) {
            this.total = total;
            this.done = done;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            bytes += buf.readableBytes();
            sum.update(buf.nioBuffer());
            buf.release();
            if (bytes == total) {
                done.complete(sum.getValue());
            }
        }
    }

    private static void awaitMrCountAtMost(long most) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (SoftwareRdma.objectCounts().get("mr") > most && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(SoftwareRdma.objectCounts().get("mr")).as("memory regions").isLessThanOrEqualTo(most);
    }

    private static Channel server(Supplier<ChannelHandler> handler) throws InterruptedException {
        return server(group, handler);
    }

    private static Channel server(EventLoopGroup group, Supplier<ChannelHandler> handler)
            throws InterruptedException {
        return new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.RECEIVE_ZERO_COPY, true)
                .childOption(RdmaChannelOption.RING_SIZE, 4 * MIB)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(handler.get());
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
    }

    private static Channel client(Channel server) throws InterruptedException {
        return client(group, server);
    }

    private static Channel client(EventLoopGroup group, Channel server) throws InterruptedException {
        return new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
    }

    static byte[] random(int size, long seed) {
        byte[] bytes = new byte[size];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    private static void sleepQuietly() {
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
