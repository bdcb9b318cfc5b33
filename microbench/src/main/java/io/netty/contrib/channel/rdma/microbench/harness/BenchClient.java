package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.util.concurrent.Promise;
import org.HdrHistogram.Histogram;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * The client JVM of one transport's run, against a {@link BenchServer}: echo round trips (one message in flight)
 * per size, the heap the loops of both sides allocate per echo, the CPU of idle loops, then streaming throughput
 * per size over 1 and N connections. Prints one {@code result} line per measurement on stdout (tab-separated:
 * transport, mode, size, connections, metric, value, unit) and progress on stderr.
 */
public final class BenchClient {
    /** Echoes longer than this are recorded as this (they would not fit the histogram). */
    static final long MAX_RTT_NANOS = TimeUnit.SECONDS.toNanos(60);
    private static final long PHASE_TIMEOUT_SECONDS = 120;

    private final Transport transport;
    private final InetAddress host = InetAddress.getLoopbackAddress();
    private final int echoPort;
    private final int sinkPort;
    private final Settings settings;
    private final PrintStream out;
    private final LoopThreads loopThreads = new LoopThreads("client-loop");
    private final EventLoopGroup group;
    private final Control control;

    private BenchClient(Transport transport, int echoPort, int sinkPort, int controlPort, Settings settings,
                        PrintStream out) throws IOException {
        this.transport = transport;
        this.echoPort = echoPort;
        this.sinkPort = sinkPort;
        this.settings = settings;
        this.out = out;
        this.control = new Control(host, controlPort);
        this.group = new MultiThreadIoEventLoopGroup(settings.threads, loopThreads, transport.ioHandlerFactory());
    }

    public static void main(String[] args) throws Exception {
        Transport transport = null;
        int echoPort = 0;
        int sinkPort = 0;
        int controlPort = 0;
        List<String> rest = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--transport" -> transport = Transport.of(args[++i]);
                case "--ports" -> {
                    String[] p = args[++i].split(",");
                    echoPort = Integer.parseInt(p[0]);
                    sinkPort = Integer.parseInt(p[1]);
                    controlPort = Integer.parseInt(p[2]);
                }
                default -> rest.add(args[i]);
            }
        }
        if (transport == null || echoPort == 0) {
            throw new IllegalArgumentException("--transport and --ports ECHO,SINK,CONTROL are required");
        }
        Settings settings = Settings.parse(rest.toArray(String[]::new));
        PrintStream out = System.out;
        System.setOut(System.err);
        BenchClient client = new BenchClient(transport, echoPort, sinkPort, controlPort, settings, out);
        try {
            client.run();
        } finally {
            client.close();
        }
    }

    private void run() throws Exception {
        Channel echo = connect(echoPort, new PingPong());
        PingPong pingPong = echo.pipeline().get(PingPong.class);
        for (int i = 0; i < settings.sizes.length; i++) {
            // The first size also warms up the JIT: until C2 has compiled the paths, the heap per echo is not steady.
            latency(pingPong, settings.sizes[i], i == 0 ? 3 : 1);
        }
        if (transport == Transport.RDMA_ADAPTIVE && settings.idleSeconds > 0) {
            idle();
        }
        echo.close().sync();
        for (int connections : settings.connections) {
            List<Stream> streams = new ArrayList<>();
            for (int i = 0; i < connections; i++) {
                streams.add(connect(sinkPort, new Stream()).pipeline().get(Stream.class));
            }
            for (int size : settings.sizes) {
                throughput(streams, size, false);
            }
            for (int size : settings.freshSizes) {
                throughput(streams, size, true);
            }
            for (Stream s : streams) {
                s.ctx.close().sync();
            }
        }
    }

    private void close() throws InterruptedException {
        control.close();
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    private Channel connect(int port, ChannelInboundHandlerAdapter handler) throws InterruptedException {
        return new Bootstrap().group(group).channel(transport.channel())
                // The same generous window for every transport, so that large messages are pipelined.
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(1 << 20, 4 << 20))
                .handler(handler)
                .connect(host, port).sync().channel();
    }

    // ---------------------------------------------------------------- echo round trip

    private void latency(PingPong pingPong, int size, int warmups) throws Exception {
        progress("%s: echo %d B", transport.key(), size);
        pingPong.prepare(size);
        pingPong.run(null, warmups * settings.latencyWarmupNanos(), Long.MAX_VALUE);

        Histogram histogram = new Histogram(MAX_RTT_NANOS, 3);
        long[] serverBefore = control.stats();
        long clientBefore = loopThreads.allocatedBytes();
        long clientSleepsBefore = loopThreads.sleeps();
        long clientCpuBefore = loopThreads.cpuNanos();
        long echoes = pingPong.run(histogram, settings.latencyNanos(), settings.latencyMaxCount);
        long clientCpuAfter = loopThreads.cpuNanos();
        long clientSleepsAfter = loopThreads.sleeps();
        long clientAfter = loopThreads.allocatedBytes();
        long[] serverAfter = control.stats();

        result(size, 1, "rtt_p50", histogram.getValueAtPercentile(50) / 1e3, "us");
        result(size, 1, "rtt_p99", histogram.getValueAtPercentile(99) / 1e3, "us");
        result(size, 1, "rtt_p99_9", histogram.getValueAtPercentile(99.9) / 1e3, "us");
        result(size, 1, "echoes", echoes, "count");
        result(size, 1, "heap_per_echo_server", (double) (serverAfter[0] - serverBefore[0]) / echoes, "B");
        result(size, 1, "heap_per_echo_client", (double) (clientAfter - clientBefore) / echoes, "B");
        result(size, 1, "cpu_per_echo_server", (serverAfter[1] - serverBefore[1]) / 1e3 / echoes, "us");
        result(size, 1, "cpu_per_echo_client", (clientCpuAfter - clientCpuBefore) / 1e3 / echoes, "us");
        if (serverBefore[4] >= 0 && clientSleepsBefore >= 0) {
            result(size, 1, "loop_sleeps_per_echo_server", (double) (serverAfter[4] - serverBefore[4]) / echoes,
                    "count");
            result(size, 1, "loop_sleeps_per_echo_client", (double) (clientSleepsAfter - clientSleepsBefore) / echoes,
                    "count");
        }
    }

    /** Sends a message, waits for all of its bytes to come back, sends it again. */
    static final class PingPong extends ChannelInboundHandlerAdapter {
        private ChannelHandlerContext ctx;
        private ByteBuf message;
        private int size;
        private int received;
        private long sentAt;
        private long deadline;
        private long maxCount;
        private long count;
        private Histogram histogram;
        private Promise<Long> done;

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        void prepare(int size) throws Exception {
            ctx.executor().submit(() -> {
                if (message != null) {
                    message.release();
                }
                this.size = size;
                message = ctx.alloc().directBuffer(size, size);
                for (int i = 0; i < size; i++) {
                    message.writeByte(i);
                }
            }).get();
        }

        /** Echoes until {@code nanos} have passed or {@code maxCount} echoes are done; returns how many. */
        long run(Histogram histogram, long nanos, long maxCount) throws Exception {
            Promise<Long> promise = ctx.executor().newPromise();
            ctx.executor().execute(() -> {
                this.histogram = histogram;
                this.done = promise;
                this.count = 0;
                this.maxCount = maxCount;
                this.deadline = System.nanoTime() + nanos;
                send();
            });
            if (!promise.await(nanos / 1_000_000_000 + PHASE_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no echo for " + PHASE_TIMEOUT_SECONDS + " s");
            }
            return promise.get();
        }

        private void send() {
            // The same buffer every time: the handler allocates nothing, what is measured is the transport.
            message.retain().readerIndex(0);
            received = 0;
            sentAt = System.nanoTime();
            ctx.writeAndFlush(message, ctx.voidPromise());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            buf.release();
            if (received < size) {
                return;
            }
            long now = System.nanoTime();
            if (received > size) {
                done.tryFailure(new IllegalStateException(received + " bytes came back for " + size));
                return;
            }
            if (histogram != null) {
                histogram.recordValue(Math.min(now - sentAt, MAX_RTT_NANOS));
            }
            if (++count >= maxCount || now - deadline >= 0) {
                done.trySuccess(count);
            } else {
                send();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (done != null) {
                done.tryFailure(new IllegalStateException("echo connection closed"));
            }
            if (message != null) {
                message.release();
                message = null;
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (done != null) {
                done.tryFailure(cause);
            }
            ctx.close();
        }
    }

    // ---------------------------------------------------------------- idle loop

    private void idle() throws Exception {
        progress("%s: idle loops for %.1f s", transport.key(), settings.idleSeconds);
        Thread.sleep(500); // let the loops leave their spin phase
        long[] before = control.stats();
        long clientBefore = loopThreads.cpuNanos();
        Thread.sleep((long) (settings.idleSeconds * 1000));
        long[] after = control.stats();
        long clientAfter = loopThreads.cpuNanos();
        double wall = after[3] - before[3];
        result(0, 1, "idle_cpu_loop_server", 100.0 * (after[1] - before[1]) / wall, "% of a core");
        result(0, 1, "idle_cpu_process_server", 100.0 * (after[2] - before[2]) / wall, "% of a core");
        result(0, 1, "idle_cpu_loop_client", 100.0 * (clientAfter - clientBefore) / wall, "% of a core");
    }

    // ---------------------------------------------------------------- streaming throughput

    /** {@code fresh}: the fresh-buffer pattern ({@link Stream#start(int, long, boolean)}), metrics {@code fresh_*}. */
    private void throughput(List<Stream> streams, int size, boolean fresh) throws Exception {
        int connections = streams.size();
        progress("%s: stream %d B over %d connection(s)%s", transport.key(), size, connections,
                fresh ? ", fresh buffers" : "");
        // Warm up with rounds of growing size; the last one tells the rate, from which the measured round is sized.
        long perConnection = Math.max(16, Math.min(4096, (4L << 20) / size));
        double rate = 0;
        long warmupEnd = System.nanoTime() + settings.throughputWarmupNanos();
        do {
            long nanos = round(streams, size, perConnection, fresh);
            rate = (double) perConnection * connections / nanos * 1e9;
            perConnection *= 2;
        } while (System.nanoTime() < warmupEnd);
        long count = Math.max(1, (long) (rate * settings.throughputNanos() / 1e9 / connections));
        long[] serverBefore = control.stats();
        long nanos = round(streams, size, count, fresh);
        long[] serverAfter = control.stats();
        if (Boolean.getBoolean("bench.metrics")) {
            // -Dbench.metrics=true: each connection's counters after the measured round (RdmaChannel only).
            for (Stream s : streams) {
                if (s.ctx.channel() instanceof RdmaChannel rdma) {
                    progress("%s: %d B%s: %s", transport.key(), size, fresh ? " fresh" : "", rdma.metric());
                }
            }
        }
        double messagesPerSecond = (double) count * connections / nanos * 1e9;
        String prefix = fresh ? "fresh_" : "";
        result(size, connections, prefix + "throughput_msgs", messagesPerSecond, "msg/s");
        result(size, connections, prefix + "throughput_bytes", messagesPerSecond * size / 1e9, "GB/s");
        // What receiving costs the sink's loop threads: CPU milliseconds per 10^9 bytes taken.
        double gigabytes = (double) count * connections * size / 1e9;
        result(size, connections, prefix + "receiver_cpu_per_gb", (serverAfter[1] - serverBefore[1]) / 1e6 / gigabytes,
                "ms");
    }

    /** Every stream sends {@code count} messages of {@code size}; returns the nanoseconds until the last ack. */
    private static long round(List<Stream> streams, int size, long count, boolean fresh) throws Exception {
        List<Promise<Long>> acks = new ArrayList<>();
        long start = System.nanoTime();
        for (Stream s : streams) {
            acks.add(s.start(size, count, fresh));
        }
        long end = start;
        for (Promise<Long> ack : acks) {
            if (!ack.await(PHASE_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                throw new IllegalStateException("stream not acknowledged within " + PHASE_TIMEOUT_SECONDS + " s");
            }
            end = Math.max(end, ack.get());
        }
        return end - start;
    }

    /** Announces {@code count * size} bytes, writes them while the channel is writable, waits for the ack. */
    static final class Stream extends ChannelInboundHandlerAdapter {
        /** How often the fresh-buffer pattern flushes: every this many writes, as applications batch. */
        static final int FRESH_FLUSH_EVERY = 64;
        private ChannelHandlerContext ctx;
        private ByteBuf source;
        private int size;
        private long left;
        private boolean fresh;
        private long sequence;
        private Promise<Long> acked;

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        /** The harness's pattern: retained slices of one buffer, void promises, a flush when unwritable. */
        Promise<Long> start(int size, long count) {
            return start(size, count, false);
        }

        /**
         * {@code fresh}: the pattern applications write instead: each message a fresh {@code ctx.alloc().buffer()}
         * carrying its sequence number (which the sink checks), written with its own promise, a flush every
         * {@link #FRESH_FLUSH_EVERY} writes.
         */
        Promise<Long> start(int size, long count, boolean fresh) {
            if (fresh && size < Long.BYTES) {
                throw new IllegalArgumentException("a fresh-buffer message carries its 8-byte sequence number: " + size);
            }
            Promise<Long> promise = ctx.executor().newPromise();
            ctx.executor().execute(() -> {
                if (!fresh && (source == null || source.capacity() < size)) {
                    if (source != null) {
                        source.release();
                    }
                    source = ctx.alloc().directBuffer(size, size);
                    source.writerIndex(size);
                }
                this.size = size;
                this.left = count;
                this.fresh = fresh;
                this.sequence = 0;
                this.acked = promise;
                ByteBuf header = ctx.alloc().directBuffer(2 * Long.BYTES).writeLong(count * size);
                if (fresh) {
                    header.setLong(0, count * size | SinkHeader.SEQUENCED).writeLong(size);
                }
                ctx.write(header, ctx.voidPromise());
                fill();
            });
            return promise;
        }

        private void fill() {
            if (fresh) {
                int sinceFlush = 0;
                while (left > 0 && ctx.channel().isWritable()) {
                    ByteBuf message = ctx.alloc().buffer(size);
                    message.writeLong(sequence++).writerIndex(size);
                    ctx.write(message, ctx.newPromise());
                    left--;
                    if (++sinceFlush == FRESH_FLUSH_EVERY) {
                        ctx.flush();
                        sinceFlush = 0;
                    }
                }
            } else {
                while (left > 0 && ctx.channel().isWritable()) {
                    ctx.write(source.retainedSlice(0, size), ctx.voidPromise());
                    left--;
                }
            }
            ctx.flush();
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            if (ctx.channel().isWritable() && left > 0) {
                fill();
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            long now = System.nanoTime();
            ((ByteBuf) msg).release();
            if (acked != null) {
                acked.trySuccess(now);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (acked != null) {
                acked.tryFailure(new IllegalStateException("stream connection closed"));
            }
            if (source != null) {
                source.release();
                source = null;
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (acked != null) {
                acked.tryFailure(cause);
            }
            ctx.close();
        }
    }

    // ---------------------------------------------------------------- output

    private void result(int size, int connections, String metric, double value, String unit) {
        out.printf(Locale.ROOT, "result\t%s\t%s\t%d\t%d\t%s\t%.6g\t%s%n", transport.transport, transport.mode,
                size, connections, metric, value, unit);
        out.flush();
    }

    private static void progress(String format, Object... args) {
        System.err.printf(Locale.ROOT, format + "%n", args);
    }

    /** The server's control port: one request-response line at a time. */
    private static final class Control implements AutoCloseable {
        private final Socket socket;
        private final BufferedReader in;
        private final PrintWriter w;

        Control(InetAddress host, int port) throws IOException {
            socket = new Socket(host, port);
            in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));
            w = new PrintWriter(socket.getOutputStream(), true, StandardCharsets.US_ASCII);
        }

        /**
         * Server loop threads' allocated bytes, their CPU nanos, the process's CPU nanos, the server's clock, how
         * often the loop threads slept (-1: unknown).
         */
        long[] stats() throws IOException {
            w.println("stats");
            String line = in.readLine();
            if (line == null) {
                throw new IOException("the server closed its control connection");
            }
            String[] f = line.split(" ");
            long[] v = new long[f.length];
            for (int i = 0; i < f.length; i++) {
                v[i] = Long.parseLong(f[i]);
            }
            return v;
        }

        @Override
        public void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // nothing left to tell the server
            }
        }
    }
}
