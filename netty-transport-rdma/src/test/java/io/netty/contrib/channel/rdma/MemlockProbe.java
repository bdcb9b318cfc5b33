package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.util.concurrent.Promise;

import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * Run by {@link RdmaPinnedMemoryTest} in a JVM under a tight {@code RLIMIT_MEMLOCK} without {@code CAP_IPC_LOCK}:
 * echoes {@code args[0]} messages of {@code args[1]} bytes (each several receive slots, so it asks for a ring), then
 * tries one registration too many, and prints what it saw as {@code key=value} lines.
 */
public final class MemlockProbe {
    private MemlockProbe() {
    }

    public static void main(String[] args) throws Exception {
        int messages = Integer.parseInt(args[0]);
        int size = Integer.parseInt(args[1]);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new Echo()).bind(TestAddress.get(), 0).sync().channel();
            Collect collect = new Collect();
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(collect).connect(server.localAddress()).sync().channel();
            CRC32 sent = new CRC32();
            long receivedCrc = 0;
            // One message at a time, each echoed before the next: the pool's two chunks hold what is in flight.
            for (int i = 0; i < messages; i++) {
                ByteBuf buf = client.alloc().directBuffer(size);
                for (int j = 0; j < size; j++) {
                    buf.writeByte(i * 31 + j);
                }
                sent.update(buf.nioBuffer());
                Promise<Long> echoed = collect.expect(group.next().newPromise(), (i + 1) * (long) size);
                client.writeAndFlush(buf).sync();
                receivedCrc = echoed.get(60, TimeUnit.SECONDS);
            }
            RdmaIoHandlerMetric m = RdmaIoHandler.metric(client.eventLoop());
            System.out.println("echoed=" + (receivedCrc == sent.getValue()));
            System.out.println("ringWrites=" + client.metric().ringWrites());
            System.out.println("sends=" + client.metric().sends());
            System.out.println("ringsOffered=" + client.metric().ringsOffered());
            System.out.println("pinnedMemory=" + m.pinnedMemory());
            System.out.println("pinnedMemoryLimit=" + m.pinnedMemoryLimit());
            try {
                // Past the limit: a dedicated chunk of 2 MiB cannot be registered.
                RdmaByteBufAllocator.defaultAllocator().directBuffer(2 << 20).release();
                System.out.println("oversized=registered");
            } catch (MemoryRegistrationException e) {
                System.out.println("oversized=" + e.getMessage());
            }
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /** Checksums what comes back; completes with the checksum once the expected bytes have arrived. */
    private static final class Collect extends ChannelInboundHandlerAdapter {
        private final CRC32 crc = new CRC32();
        private volatile Promise<Long> done;
        private volatile long expected;
        private long received;

        Promise<Long> expect(Promise<Long> promise, long bytes) {
            expected = bytes;
            done = promise;
            return promise;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            crc.update(buf.nioBuffer());
            buf.release();
            if (received >= expected) {
                done.trySuccess(crc.getValue());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
        }
    }
}
