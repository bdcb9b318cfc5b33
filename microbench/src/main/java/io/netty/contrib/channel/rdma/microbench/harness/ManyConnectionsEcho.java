package io.netty.contrib.channel.rdma.microbench.harness;

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
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * Many connections in one JVM, each echoing a few megabytes at once, as a storage or RPC client would: every
 * connection writes its bytes as fresh buffers of {@code --write} bytes, each with its own promise, while the
 * channel is writable; the server echoes what it reads; the client checks the CRC-32 of what comes back against what
 * it sent. Prints, per transport, the aggregate rate each way (all connections' bytes over the time from the first
 * write to the last verified byte) and, for RDMA, how many connections got a receive ring.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp microbench/target/microbenchmarks.jar \
 *   io.netty.contrib.channel.rdma.microbench.harness.ManyConnectionsEcho \
 *   [--transports rdma,nio,epoll] [--connections 500] [--bytes 2097152] [--write 65536] [--loops 1] [--repeat 1]
 *   [--ring-memory BYTES] [--metrics]
 * </pre>
 */
public final class ManyConnectionsEcho {
    private ManyConnectionsEcho() {
    }

    record Result(Transport transport, int connections, long bytes, double seconds, String rings) {
        double mibPerSecond() {
            return (double) connections * bytes / seconds / (1 << 20);
        }

        String line() {
            return String.format(Locale.ROOT, "%-15s %5d connections x %8d B  %8.1f MiB/s each way  (%.2f s)%s",
                    transport.key(), connections, bytes, mibPerSecond(), seconds, rings);
        }
    }

    public static void main(String[] args) throws Exception {
        List<Transport> transports = List.of(Transport.RDMA_ADAPTIVE, Transport.NIO, Transport.EPOLL);
        int connections = 500;
        int bytes = 2 << 20;
        int write = 64 << 10;
        int loops = 1;
        int repeat = 1;
        long ringMemory = -1;
        boolean metrics = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--transports" -> {
                    List<Transport> list = new ArrayList<>();
                    for (String t : args[++i].split(",")) {
                        list.add(Transport.of(t));
                    }
                    transports = list;
                }
                case "--connections" -> connections = Integer.parseInt(args[++i]);
                case "--bytes" -> bytes = Integer.parseInt(args[++i]);
                case "--write" -> write = Integer.parseInt(args[++i]);
                case "--loops" -> loops = Integer.parseInt(args[++i]);
                case "--repeat" -> repeat = Integer.parseInt(args[++i]);
                case "--ring-memory" -> ringMemory = Long.parseLong(args[++i]);
                case "--metrics" -> metrics = true;
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        // results[r * n + k]: repeat r of transports[k]; every other repeat runs the transports in reverse order, so
        // that a machine whose speed drifts within minutes does not favour the same one in every ratio.
        int n = transports.size();
        Result[] byIndex = new Result[repeat * n];
        for (int r = 0; r < repeat; r++) {
            for (int i = 0; i < n; i++) {
                int k = r % 2 == 0 ? i : n - 1 - i;
                Result result = run(transports.get(k), connections, bytes, write, loops, ringMemory, metrics);
                System.out.println(result.line());
                byIndex[r * n + k] = result;
            }
        }
        List<Result> results = List.of(byIndex);
        if (transports.size() > 1) {
            for (int r = 0; r < repeat; r++) {
                Result base = results.get(r * transports.size() + transports.size() - 1);
                StringBuilder b = new StringBuilder("repeat " + (r + 1) + ":");
                for (int k = 0; k < transports.size(); k++) {
                    Result x = results.get(r * transports.size() + k);
                    b.append(String.format(Locale.ROOT, "  %s %.2fx %s", x.transport.key(),
                            x.mibPerSecond() / base.mibPerSecond(), base.transport.key()));
                }
                System.out.println(b);
            }
        }
    }

    static Result run(Transport transport, int connections, int bytes, int write, int loops, long ringMemory,
                      boolean metrics) throws Exception {
        IoHandlerFactory factory = transport.rdma() && ringMemory >= 0
                ? RdmaIoHandler.newFactory(transport.config().ringMemory(ringMemory)) : transport.ioHandlerFactory();
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(loops, factory);
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(loops, factory);
        List<Channel> accepted = new ArrayList<>();
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(transport.serverChannel())
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            synchronized (accepted) {
                                accepted.add(ch);
                            }
                            ch.pipeline().addLast(new Echo());
                        }
                    })
                    .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            Bootstrap bootstrap = new Bootstrap().group(clientGroup).channel(transport.channel())
                    .option(ChannelOption.AUTO_READ, true);
            List<Sender> senders = new ArrayList<>();
            List<Channel> channels = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                Sender s = new Sender(i, bytes, write);
                senders.add(s);
                channels.add(bootstrap.handler(s).connect(address).sync().channel());
            }
            long start = System.nanoTime();
            for (Channel ch : channels) {
                ch.eventLoop().execute(() -> senders.get(channels.indexOf(ch)).start(ch));
            }
            for (Sender s : senders) {
                s.done.get(300, TimeUnit.SECONDS);
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            String rings = "";
            if (transport.rdma()) {
                long withRing = channels.stream().filter(c -> ((RdmaChannel) c).metric().ringWrites() > 0).count();
                rings = "  (" + withRing + " of " + connections + " client connections wrote to a ring)";
                if (metrics) {
                    synchronized (accepted) {
                        rings += "\n    clients: " + sum(channels) + "\n    server:  " + sum(accepted);
                    }
                }
            }
            for (Channel ch : channels) {
                ch.close().sync();
            }
            server.close().sync();
            return new Result(transport, connections, bytes, seconds, rings);
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** The channels' metrics summed, for {@code --metrics}. */
    private static String sum(List<Channel> channels) {
        long sends = 0, ringWrites = 0, stalls = 0, stallNanos = 0, offered = 0, withdrawn = 0, copies = 0;
        for (Channel c : channels) {
            var m = ((RdmaChannel) c).metric();
            sends += m.sends();
            ringWrites += m.ringWrites();
            stalls += m.creditStalls();
            stallNanos += m.creditStallNanos();
            offered += m.ringsOffered();
            withdrawn += m.ringsWithdrawn();
            copies += m.copies();
        }
        return String.format(Locale.ROOT, "sends %d, ring writes %d, credit stalls %d (%.1f ms in all), rings offered"
                + " %d, withdrawn %d, copies %d", sends, ringWrites, stalls, stallNanos / 1e6, offered, withdrawn,
                copies);
    }

    /** The server's echo: writes back what it reads, flushing at the end of each read burst. */
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg, ctx.voidPromise());
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            // Backpressure: stop reading while the echo cannot be written.
            ctx.channel().config().setAutoRead(ctx.channel().isWritable());
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            cause.printStackTrace();
            ctx.close();
        }
    }

    /** One client connection: writes its bytes in fresh buffers while writable, verifies the echo's CRC. */
    private static final class Sender extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Void> done = new CompletableFuture<>();
        private final int bytes;
        private final int write;
        private final SplittableRandom random;
        private final CRC32 sent = new CRC32();
        private final CRC32 received = new CRC32();
        private final byte[] scratch;
        private long written;
        private long echoed;
        private Channel channel;

        Sender(int id, int bytes, int write) {
            this.bytes = bytes;
            this.write = write;
            this.random = new SplittableRandom(id);
            this.scratch = new byte[write];
        }

        @Override
        public boolean isSharable() {
            return true;
        }

        void start(Channel ch) {
            channel = ch;
            writeMore();
        }

        private void writeMore() {
            while (written < bytes && channel.isWritable()) {
                int n = (int) Math.min(write, bytes - written);
                for (int k = 0; k < n; k += 8) {
                    long v = random.nextLong();
                    for (int j = 0; j < 8 && k + j < n; j++) {
                        scratch[k + j] = (byte) (v >>> (8 * j));
                    }
                }
                sent.update(scratch, 0, n);
                ByteBuf buf = channel.alloc().buffer(n);
                buf.writeBytes(scratch, 0, n);
                written += n;
                channel.write(buf).addListener(ChannelFutureListener.FIRE_EXCEPTION_ON_FAILURE);
            }
            channel.flush();
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            if (channel != null && ctx.channel().isWritable()) {
                writeMore();
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                echoed += buf.readableBytes();
                received.update(buf.nioBuffer());
            } finally {
                buf.release();
            }
            if (echoed == bytes) {
                if (received.getValue() == sent.getValue()) {
                    done.complete(null);
                } else {
                    done.completeExceptionally(new IllegalStateException("CRC of the echo differs"));
                }
            } else if (echoed > bytes) {
                done.completeExceptionally(new IllegalStateException("more bytes echoed than sent"));
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.completeExceptionally(new IllegalStateException("closed after " + echoed + " of " + bytes + " B"));
        }
    }
}
