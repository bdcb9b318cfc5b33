package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A channel with {@code AUTO_READ} off sees its peer's close even when it never asks to read: what the peer sent
 * before closing is delivered (one message per read, as configured) and then the channel goes inactive, as on
 * Netty's epoll and io_uring transports. Netty's own test of this ({@code DetectPeerCloseWithoutReadTest}) is in
 * {@code netty-transport-native-unix-common-tests}, which Maven Central does not serve for 4.2.17; this class
 * asks the same of RDMA channels in both directions, with reads requested after each message or never, for a
 * few bytes (SEND) and for messages above the SEND size (ring writes).
 */
@Timeout(30)
class RdmaDetectPeerCloseWithoutReadTest {
    private static final RdmaSocketTestPermutation RDMA = RdmaSocketTestPermutation.INSTANCE;
    private static final int SMALL = 100;
    private static final int LARGE = 200_000;

    @Test
    void clientCloseIsDetectedByServerThatNeverReads() throws Exception {
        clientClosesAfterWriting(SMALL, false);
    }

    @Test
    void clientCloseIsDetectedByServerThatReadsAfterEachMessage() throws Exception {
        clientClosesAfterWriting(SMALL, true);
    }

    @Test
    void clientCloseAfterRingWritesIsDetectedByServerThatNeverReads() throws Exception {
        clientClosesAfterWriting(LARGE, false);
    }

    @Test
    void serverCloseIsDetectedByClientThatNeverReads() throws Exception {
        serverClosesAfterWriting(SMALL, false);
    }

    @Test
    void serverCloseIsDetectedByClientThatReadsAfterEachMessage() throws Exception {
        serverClosesAfterWriting(SMALL, true);
    }

    @Test
    void serverCloseAfterRingWritesIsDetectedByClientThatNeverReads() throws Exception {
        serverClosesAfterWriting(LARGE, false);
    }

    private static void clientClosesAfterWriting(int bytes, boolean readAfterEachMessage) throws Exception {
        Reader reader = new Reader(readAfterEachMessage);
        Channel server = new ServerBootstrap().group(RDMA.serverGroup).channel(RdmaServerChannel.class)
                // one small message per read() and nothing read unless asked: several reads are needed
                .childOption(ChannelOption.AUTO_READ, false)
                .childOption(ChannelOption.MAX_MESSAGES_PER_READ, 1)
                .childOption(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(SMALL / 10))
                .childHandler(reader)
                .bind(TestAddress.get(), 0).sync().channel();
        try {
            Channel client = new Bootstrap().group(RDMA.clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            writeAndClose(client, bytes);
            reader.assertClosedAfterReading(bytes);
        } finally {
            server.close().sync();
        }
    }

    private static void serverClosesAfterWriting(int bytes, boolean readAfterEachMessage) throws Exception {
        Channel server = new ServerBootstrap().group(RDMA.serverGroup).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        writeAndClose(ctx.channel(), bytes);
                    }
                })
                .bind(TestAddress.get(), 0).sync().channel();
        Channel client = null;
        try {
            Reader reader = new Reader(readAfterEachMessage);
            client = new Bootstrap().group(RDMA.clientGroup).channel(RdmaChannel.class)
                    .option(ChannelOption.AUTO_READ, false)
                    .option(ChannelOption.MAX_MESSAGES_PER_READ, 1)
                    .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(SMALL / 10))
                    .handler(reader)
                    .connect(server.localAddress()).sync().channel();
            reader.assertClosedAfterReading(bytes);
        } finally {
            if (client != null) {
                client.close().sync();
            }
            server.close().sync();
        }
    }

    /** Writes {@code bytes} in writes of at most 64 KiB, then closes once they are written. */
    private static void writeAndClose(Channel ch, int bytes) {
        for (int left = bytes; left > 0; ) {
            int n = Math.min(left, 65536);
            ByteBuf buf = ch.alloc().directBuffer(n);
            buf.writerIndex(n);
            if (left == n) {
                ch.writeAndFlush(buf).addListener(ChannelFutureListener.CLOSE);
            } else {
                ch.write(buf);
            }
            left -= n;
        }
    }

    private static final class Reader extends ChannelInboundHandlerAdapter {
        private final boolean readAfterEachMessage;
        private final AtomicLong read = new AtomicLong();
        private final CountDownLatch inactive = new CountDownLatch(1);

        Reader(boolean readAfterEachMessage) {
            this.readAfterEachMessage = readAfterEachMessage;
        }

        @Override
        public boolean isSharable() {
            return true;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            read.addAndGet(buf.readableBytes());
            buf.release();
            if (readAfterEachMessage) {
                ctx.read();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            inactive.countDown();
        }

        void assertClosedAfterReading(long expected) throws InterruptedException {
            assertThat(inactive.await(10, TimeUnit.SECONDS)).as("the peer's close seen (channelInactive) after "
                    + read.get() + " bytes").isTrue();
            assertThat(read.get()).as("bytes read before the close").isEqualTo(expected);
        }
    }
}
