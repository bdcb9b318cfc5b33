package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.grpc.ManagedChannel;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The client of the fault matrix (testsuite/rxe-vm/faults.sh), one JVM per row:
 * {@code FaultClientProcess HOST PORT SECONDS ACK_TIMEOUT RETRY_COUNT STREAMS GRPC_PORT}. Opens {@code STREAMS} echo
 * channels to a {@link FaultServerProcess} and streams through each, for {@code SECONDS}, writes of random sizes
 * (1 B to 256 KiB: SENDs and ring writes) of a byte stream every position of which is a function of the stream
 * and the position, so a lost, duplicated or reordered byte shows as a mismatch at its offset; at most 2 MiB is
 * in flight per stream. Then it stops writing, waits up to 30 s for the rest of the echo, closes, waits for the
 * fault to end (the file named by the system property {@code fault.healedFile}, when set), and opens one new channel
 * that echoes 64 KiB (the server still answers). Prints, one a line:
 * {@code STREAMING <epoch ms>} once every stream is connected; {@code STALLED <i> <connection>} for a stream
 * still open that did not drain (what its connection holds; 3 s later the streams close); {@code STREAM <i> sent=<bytes> verified=<bytes>
 * mismatch=<offset or none> closed=<epoch ms or open> writesFailed=<n> writesPending=<n> cause=<...>} per stream;
 * {@code HEALED after <ms>|never (60 s)}; {@code NEWCLIENT ok|FAILED <ms or cause>}; {@code GRPC calls=<n> ok=<n> failed=<n> verifiedBytes=<n> mismatches=<n>
 * failures=<status codes> last=<...>}, the gRPC calls made beside the streams on the same loop ({@link FaultGrpc}),
 * and {@code GRPC-NEW ok|FAILED <ms or status>}, one 64 KiB call on a new gRPC channel after them;
 * {@code CLIENT-QPS <queue pairs left on the loop>};
 * {@code RESULT ...} with the totals. The system property {@code fault.ringSize}, when set, is the channels'
 * {@code RING_SIZE} (0: no receive rings, large messages by SEND). Exit code 0 when it got that far (the verdict is the script's).
 */
public final class FaultClientProcess {
    /** The system property both fault programs take as their channels' {@code RING_SIZE} when set. */
    static final String RING_SIZE_PROPERTY = "fault.ringSize";
    /** A file the script creates once the fault has ended; the new client waits for it ({@link #awaitHealed}). */
    static final String HEALED_PROPERTY = "fault.healedFile";
    private static final int WINDOW = 2 << 20;
    private static final int MAX_WRITE = 256 << 10;

    private FaultClientProcess() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: FaultClientProcess HOST PORT SECONDS ACK_TIMEOUT RETRY_COUNT STREAMS GRPC_PORT");
            System.exit(2);
        }
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        long seconds = Long.parseLong(args[2]);
        int ackTimeout = Integer.parseInt(args[3]);
        int retryCount = Integer.parseInt(args[4]);
        int count = Integer.parseInt(args[5]);
        InetSocketAddress grpcAddress = new InetSocketAddress(host, Integer.parseInt(args[6]));
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Bootstrap b = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 120_000)
                    .option(RdmaChannelOption.ACK_TIMEOUT, ackTimeout)
                    .option(RdmaChannelOption.RETRY_COUNT, retryCount);
            Integer ringSize = Integer.getInteger(RING_SIZE_PROPERTY);
            if (ringSize != null) {
                b.option(RdmaChannelOption.RING_SIZE, ringSize);
            }
            List<Stream> streams = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                Stream s = new Stream(i);
                Channel ch = b.clone().handler(s).connect(host, port).sync().channel();
                print("CONNECTED " + i + " " + ch.localAddress() + " " + ((RdmaChannel) ch).connectionSettings());
                streams.add(s);
            }
            ManagedChannel grpcChannel = FaultGrpc.channel(grpcAddress, group, ackTimeout, retryCount);
            // Connected before the streams fill the wire: under emulation every round trip waits behind them.
            String warmUp = FaultGrpc.call(grpcChannel, -1, 100, FaultGrpc.CALL_SECONDS);
            print("GRPC-CONNECTED " + (warmUp == null ? "ok" : warmUp));
            FaultGrpc.Caller caller = new FaultGrpc.Caller(grpcChannel);
            Thread calls = new Thread(caller, "grpc-caller");
            long start = System.currentTimeMillis();
            print("STREAMING " + start);
            for (Stream s : streams) {
                s.channel.eventLoop().execute(s::pump);
            }
            calls.start();
            Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
            long stop = System.currentTimeMillis();
            caller.stop();
            for (Stream s : streams) {
                s.channel.eventLoop().execute(s::stopWriting);
            }
            long elapsedMs = stop - start;
            boolean stalled = false;
            for (Stream s : streams) {
                try {
                    s.drained.get(30, TimeUnit.SECONDS);
                } catch (Exception e) {
                    // reported below: a stream that closed or never drained
                }
                if (s.channel.isActive() && s.closedAt == 0 && s.verified != s.sent) {
                    print("STALLED " + s.index + " " + connectionState(s.channel));
                    stalled = true;
                }
            }
            if (stalled) {
                Thread.sleep(3000); // the script asks the server for its children's state meanwhile
            }
            long verifiedTotal = 0;
            int survived = 0;
            int mismatches = 0;
            for (Stream s : streams) {
                long closedAt = s.closedAt; // before our own close below
                boolean open = s.channel.isActive() && closedAt == 0;
                if (open && s.mismatch < 0 && s.verified == s.sent) {
                    survived++;
                }
                s.channel.close().await(30, TimeUnit.SECONDS);
                // the close promise completes before the loop has failed the writes still queued: wait for them
                awaitZero(() -> s.writes.get() - s.writesDone.get(), 15);
                mismatches += s.mismatch >= 0 ? 1 : 0;
                verifiedTotal += s.verified;
                print("STREAM " + s.index + " sent=" + s.sent + " verified=" + s.verified + " mismatch="
                        + (s.mismatch < 0 ? "none" : Long.toString(s.mismatch)) + " closed="
                        + (closedAt == 0 ? "open" : Long.toString(closedAt)) + " writesFailed="
                        + s.writesFailed.get() + " writesPending=" + (s.writes.get() - s.writesDone.get())
                        + " cause=" + (s.cause == null ? "none" : describe(s.cause))
                        + " metric=" + ((RdmaChannel) s.channel).metric().toString().replace(' ', '_'));
            }
            awaitHealed();
            print("NEWCLIENT " + newClient(b, host, port));
            calls.join(TimeUnit.SECONDS.toMillis(FaultGrpc.CALL_SECONDS + 5));
            print("GRPC " + caller);
            grpcChannel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            print("GRPC-NEW " + newGrpcChannel(grpcAddress, group, ackTimeout, retryCount));
            // the closes' queue pairs are destroyed on the loop; a close lingers (at most 10 s) while its sends
            // are in flight
            EventLoopGroup g = group;
            awaitZero(() -> RdmaIoHandler.metric(g.next()).queuePairs(), 15);
            print("CLIENT-QPS " + RdmaIoHandler.metric(group.next()).queuePairs());
            print(String.format("RESULT streams=%d survived=%d verifiedBytes=%d mismatches=%d seconds=%.1f "
                    + "MBps=%.2f", count, survived, verifiedTotal, mismatches, elapsedMs / 1000.0,
                    verifiedTotal / 1e6 / (elapsedMs / 1000.0)));
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * Waits until the fault has ended: until the file named by the system property {@link #HEALED_PROPERTY} exists
     * (the script creates it once it has undone the fault), 60 s at most. The new client and the new gRPC channel
     * must find the fabric whole again; under emulation the fault can outlast the streams. Prints
     * {@code HEALED after <ms>} or {@code HEALED never (60 s)}.
     */
    private static void awaitHealed() throws InterruptedException {
        String file = System.getProperty(HEALED_PROPERTY);
        if (file == null) {
            return;
        }
        long t0 = System.nanoTime();
        long deadline = t0 + TimeUnit.SECONDS.toNanos(60);
        while (!Files.exists(Path.of(file))) {
            if (System.nanoTime() > deadline) {
                print("HEALED never (60 s)");
                return;
            }
            Thread.sleep(50);
        }
        print("HEALED after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + " ms");
    }

    /** Waits up to {@code seconds} for {@code count} to reach 0. */
    private static void awaitZero(LongSupplier count, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (count.getAsLong() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
    }

    /** One call of 64 KiB on a new gRPC channel, verified: {@code ok <ms>} or {@code FAILED <status>}. */
    private static String newGrpcChannel(InetSocketAddress address, EventLoopGroup group, int ackTimeout,
                                         int retryCount) throws InterruptedException {
        long t0 = System.nanoTime();
        ManagedChannel channel = FaultGrpc.channel(address, group, ackTimeout, retryCount);
        try {
            String failure = FaultGrpc.call(channel, 1_000_000, 64 << 10, 30);
            return failure == null ? "ok " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + "ms"
                    : "FAILED " + failure;
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
    }

    /** One fresh channel echoing 64 KiB, verified: {@code ok <ms>} or {@code FAILED <cause>}. */
    private static String newClient(Bootstrap b, String host, int port) {
        long t0 = System.nanoTime();
        Stream s = new Stream(99);
        s.limit = 64 << 10;
        try {
            ChannelFuture f = b.clone().option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 30_000).handler(s)
                    .connect(host, port);
            if (!f.await(40, TimeUnit.SECONDS) || !f.isSuccess()) {
                return "FAILED connect: " + (f.cause() == null ? "timed out" : describe(f.cause()));
            }
            s.channel.eventLoop().execute(s::pump);
            s.drained.get(30, TimeUnit.SECONDS);
            s.channel.close().await(10, TimeUnit.SECONDS);
            if (s.mismatch >= 0 || s.verified != s.limit) {
                return "FAILED echo: verified " + s.verified + " of " + s.limit + " mismatch " + s.mismatch;
            }
            return "ok " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + "ms";
        } catch (Exception e) {
            s.channel.close();
            return "FAILED " + describe(s.cause != null ? s.cause : e);
        }
    }

    /**
     * What a stalled channel's connection holds (its credits, send queue, rings, received messages), read on its
     * event loop: the transport's own description of its state, reached by reflection, since it is package-private.
     */
    static String connectionState(Channel ch) {
        try {
            return ch.eventLoop().submit(() -> {
                Field f = RdmaChannel.class.getDeclaredField("connection");
                f.setAccessible(true);
                Object c = f.get(ch);
                return c == null ? "no connection" : c.toString();
            }).get(5, TimeUnit.SECONDS).replace('\n', ' ');
        } catch (Exception e) {
            return "state unavailable: " + describe(e);
        }
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null && sb.length() < 400; c = c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return sb.toString().replace('\n', ' ');
    }

    static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** The byte at {@code position} of stream {@code index}: one 64-bit mix per 8 positions. */
    static long word(int index, long wordIndex) {
        long z = wordIndex * 0x9E3779B97F4A7C15L + index * 0xBF58476D1CE4E5B9L + 1;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static byte at(int index, long position) {
        return (byte) (word(index, position >>> 3) >>> ((position & 7) << 3));
    }

    /** One echo stream; every field is touched on its channel's event loop only, except as read after it ends. */
    private static final class Stream extends ChannelInboundHandlerAdapter {
        final int index;
        final Random sizes;
        final CompletableFuture<Void> drained = new CompletableFuture<>();
        final AtomicLong writes = new AtomicLong();
        final AtomicLong writesDone = new AtomicLong();
        final AtomicLong writesFailed = new AtomicLong();
        volatile Channel channel;
        volatile long sent;
        volatile long verified;
        volatile long mismatch = -1;
        volatile long closedAt;
        volatile Throwable cause;
        long limit = Long.MAX_VALUE;
        boolean writing = true;

        Stream(int index) {
            this.index = index;
            this.sizes = new Random(index * 31L + 7);
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            channel = ctx.channel();
        }

        void pump() {
            Channel ch = channel;
            boolean wrote = false;
            while (writing && ch.isActive() && sent < limit && sent - verified < WINDOW) {
                int size = (int) Math.min(limit - sent, 1 + sizes.nextInt(sizes.nextBoolean() ? 9000 : MAX_WRITE));
                ByteBuf buf = ch.alloc().directBuffer(size);
                long p = sent;
                for (int i = 0; i < size; i++, p++) {
                    buf.writeByte(at(index, p));
                }
                sent += size;
                writes.incrementAndGet();
                ch.write(buf).addListener(f -> {
                    writesDone.incrementAndGet();
                    if (!f.isSuccess()) {
                        writesFailed.incrementAndGet();
                    }
                });
                wrote = true;
            }
            if (wrote) {
                ch.flush();
            }
            if (sent >= limit) {
                writing = false;
            }
            checkDrained();
        }

        void stopWriting() {
            writing = false;
            checkDrained();
        }

        private void checkDrained() {
            if (!writing && verified == sent) {
                drained.complete(null);
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                long p = verified;
                int n = buf.readableBytes();
                if (mismatch < 0) {
                    for (int i = 0; i < n; i++, p++) {
                        if (buf.getByte(buf.readerIndex() + i) != at(index, p) || p >= sent) {
                            mismatch = p;
                            drained.completeExceptionally(new IllegalStateException("mismatch at " + p));
                            ctx.close();
                            return;
                        }
                    }
                    verified = p;
                }
            } finally {
                buf.release();
            }
            pump();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
            if (cause == null) {
                cause = t;
            }
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            closedAt = System.currentTimeMillis();
            drained.completeExceptionally(new IllegalStateException("closed after " + verified + " of " + sent
                    + " bytes"));
        }
    }
}
