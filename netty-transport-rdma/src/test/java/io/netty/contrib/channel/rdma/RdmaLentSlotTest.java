package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * SENDs of at least a quarter of a receive slot reach the reader as buffers over their slot ({@link QueueGroup#lend}):
 * the bytes stay the reader's however long it keeps them, the peer's credit comes back at once, the slot comes back
 * when the reader releases the buffer (on any thread), and past the loop's limit of lent slots messages are copied.
 */
@Timeout(60)
class RdmaLentSlotTest {
    private static final int SIZE = 4000;

    @Test
    void heldMessagesStayIntactAndTheirSlotsComeBackWhenReleased() throws Exception {
        try (Run run = new Run(new RdmaIoHandlerConfig(), 300)) {
            run.checkContents();
            assertThat(run.metric().zeroCopyBuffers()).as("lent, not copied").isEqualTo(300);
            assertThat(run.metric().copies()).isZero();
            assertThat(run.lentSlots()).isEqualTo(300);
            // Released on another thread than the loop's: the slot comes back on the loop.
            Thread releaser = new Thread(() -> run.held.forEach(ByteBuf::release));
            releaser.start();
            releaser.join();
            run.held.clear();
            awaitZero(run);
        }
    }

    @Test
    void pastTheLimitOfLentSlotsMessagesAreCopied() throws Exception {
        // An SRQ of 256 lends 64 slots at once.
        try (Run run = new Run(new RdmaIoHandlerConfig().sharedReceiveQueueSize(256), 200)) {
            run.checkContents();
            int limit = 256 / QueueGroup.LEND_SHARE;
            assertThat(run.metric().zeroCopyBuffers()).isEqualTo(limit);
            assertThat(run.metric().copies()).isEqualTo(200 - limit);
            run.held.forEach(ByteBuf::release);
            run.held.clear();
            awaitZero(run);
        }
    }

    @Test
    void smallMessagesAndAnAllocatorOfTheApplicationGetCopies() throws Exception {
        try (Run run = new Run(new RdmaIoHandlerConfig(), 50, SIZE, false)) {
            run.checkContents();
            assertThat(run.metric().zeroCopyBuffers()).isZero();
            assertThat(run.metric().copies()).as("each message, or its parts").isGreaterThanOrEqualTo(50);
        }
        try (Run run = new Run(new RdmaIoHandlerConfig(), 50, 1000, true)) {
            run.checkContents();
            assertThat(run.metric().zeroCopyBuffers()).as("1000 B: under a quarter of the 8 KiB slot").isZero();
            assertThat(run.metric().copies()).isGreaterThanOrEqualTo(50);
        }
    }

    /**
     * The server's loop stops, and its queue group with it, while the reader still holds lent buffers: their blocks
     * stay until they are released. (The pool itself lives while any RDMA loop of the process does: the client's.)
     */
    @Test
    void lentBuffersOutliveTheirLoop() throws Exception {
        Run run = new Run(new RdmaIoHandlerConfig(), 100);
        try {
            run.client.close().sync();
            run.server.close().sync();
            run.serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            System.gc();
            run.checkContents();
            assertThat(run.child.get().metric().zeroCopyBuffers()).isEqualTo(100);
        } finally {
            run.held.forEach(ByteBuf::release);
            run.clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static void awaitZero(Run run) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (run.lentSlots() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(run.lentSlots()).as("lent slots after every buffer was released").isZero();
    }

    /**
     * A client writes {@code count} messages of {@code size} bytes, each filled with its sequence number, each alone
     * in its flush (so each is a SEND of its own); the server's handler keeps every buffer it is handed.
     */
    private static final class Run implements AutoCloseable {
        final EventLoopGroup serverGroup;
        final EventLoopGroup clientGroup;
        final List<ByteBuf> held = new CopyOnWriteArrayList<>();
        final CompletableFuture<RdmaChannel> child = new CompletableFuture<>();
        final int size;
        final Channel server;
        final Channel client;

        Run(RdmaIoHandlerConfig config, int count) throws Exception {
            this(config, count, SIZE, true);
        }

        Run(RdmaIoHandlerConfig config, int count, int size, boolean rdmaAllocator) throws Exception {
            SoftwareRdma.use();
            this.size = size;
            serverGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(config));
            clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
            AtomicLong bytes = new AtomicLong();
            CountDownLatch all = new CountDownLatch(1);
            ServerBootstrap b = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            child.complete((RdmaChannel) ctx.channel());
                            ByteBuf buf = (ByteBuf) msg;
                            held.add(buf);
                            if (bytes.addAndGet(buf.readableBytes()) == (long) count * size) {
                                all.countDown();
                            }
                        }
                    });
            if (!rdmaAllocator) {
                b.childOption(ChannelOption.ALLOCATOR, UnpooledByteBufAllocator.DEFAULT);
            }
            server = b.bind(TestAddress.get(), 0).sync().channel();
            client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            for (int i = 0; i < count; i++) {
                ByteBuf m = client.alloc().buffer(size);
                for (int j = 0; j < size; j++) {
                    m.writeByte(i);
                }
                // One at a time: a backlog would be coalesced, or gathered into ring writes.
                client.writeAndFlush(m).sync();
            }
            assertThat(all.await(20, TimeUnit.SECONDS)).as("every message arrived").isTrue();
        }

        /** Every message's bytes are its own sequence number, in order. */
        void checkContents() {
            long at = 0;
            for (ByteBuf buf : held) {
                for (int i = buf.readerIndex(); i < buf.writerIndex(); i++, at++) {
                    if (buf.getByte(i) != (byte) (at / size)) {
                        assertThat(buf.getByte(i)).as("byte %d of message %d", at % size, at / size)
                                .isEqualTo((byte) (at / size));
                    }
                }
            }
        }

        /** Read on the loop: it counts a copy after the handler has seen the bytes. */
        RdmaChannelMetric metric() throws Exception {
            RdmaChannel ch = child.get(5, TimeUnit.SECONDS);
            return ch.eventLoop().submit(ch::metric).get(5, TimeUnit.SECONDS);
        }

        int lentSlots() throws Exception {
            EventLoop loop = child.get(5, TimeUnit.SECONDS).eventLoop();
            return loop.submit(() -> RdmaIoHandler.metric(loop).handler.lentSlots()).get(5, TimeUnit.SECONDS);
        }

        @Override
        public void close() throws Exception {
            client.close().sync();
            server.close().sync();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            held.forEach(ByteBuf::release);
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
