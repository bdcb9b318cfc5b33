package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * The client half of the cross-process echo tests: sends messages from 1 B to 5 MiB (across the SEND /
 * ring-write boundary) to an {@link EchoServerProcess}, checks the echo by CRC32, and closes. As a program
 * ({@code EchoClientProcess HOST PORT}) it prints {@code ECHOED <bytes> <crc>} and exits 0 when the echo
 * matched.
 */
public final class EchoClientProcess {
    /** Message sizes: both sides of the 8 KiB SEND size (8184 B payload after the header), ring writes above. */
    static final int[] SIZES = {1, 64, 8000, 8184, 8185, 65536, 1 << 20, 5 << 20};

    private EchoClientProcess() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: EchoClientProcess HOST PORT");
            System.exit(2);
        }
        long bytes = echo(args[0], Integer.parseInt(args[1]));
        System.out.println("ECHOED " + bytes);
    }

    /**
     * Echoes every message of {@link #SIZES} through {@code host:port} and checks the CRC of all that came back.
     *
     * @return the number of bytes echoed
     * @throws IllegalStateException if what came back differs from what was sent
     */
    static long echo(String host, int port) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Random random = new Random(7);
            CRC32 sent = new CRC32();
            long total = 0;
            List<byte[]> messages = new ArrayList<>();
            for (int size : SIZES) {
                byte[] m = new byte[size];
                random.nextBytes(m);
                sent.update(m);
                total += size;
                messages.add(m);
            }
            long expected = total;
            CompletableFuture<Long> echoed = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        private final CRC32 crc = new CRC32();
                        private long received;

                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf buf = (ByteBuf) msg;
                            received += buf.readableBytes();
                            crc.update(buf.nioBuffer());
                            buf.release();
                            if (received >= expected) {
                                echoed.complete(crc.getValue());
                            }
                        }

                        @Override
                        public void channelInactive(ChannelHandlerContext ctx) {
                            echoed.completeExceptionally(new IllegalStateException("connection closed after "
                                    + received + " of " + expected + " bytes"));
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            echoed.completeExceptionally(cause);
                        }
                    }).connect(host, port).sync().channel();
            for (byte[] m : messages) {
                client.write(client.alloc().directBuffer(m.length).writeBytes(m));
            }
            client.flush();
            long crc = echoed.get(60, TimeUnit.SECONDS);
            if (crc != sent.getValue()) {
                throw new IllegalStateException("echo CRC " + Long.toHexString(crc) + ", sent "
                        + Long.toHexString(sent.getValue()));
            }
            client.close().sync();
            return total;
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
