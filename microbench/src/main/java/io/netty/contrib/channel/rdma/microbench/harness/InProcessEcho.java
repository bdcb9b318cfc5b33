package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.util.concurrent.Promise;
import org.HdrHistogram.Histogram;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Echo round trips between two event loops of ONE process: one loop serves, the other pings. On the software
 * device the data path is then a function call and a {@code memcpy}, so what the transport itself costs per
 * message shows with sub-microsecond resolution (between processes the device's wire hides it). Compare with
 * {@code native/bench/verbs_pingpong}, the raw-verbs floor measured the same way.
 *
 * <p>{@code InProcessEcho [--transports rdma-busy-poll,rdma,epoll] [--sizes 64,4096,65536] [--warmup N]
 * [--count N] [--stream-sizes 64,1024] [--stream-patterns slices,fresh] [--one-loop-sizes 64,4096,65536]
 * [--repeat N] [--floor 64=1.6,4096=2.1,... | --floor-command native/tests/build/floor
 * [--floor-libraries native/build/lib]] [--out page.md]}: one line per transport and size with p50 / p99 round
 * trip, CPU and sleeps per echo of both loops; then one line per transport, streaming size and pattern ("slices",
 * "fresh": {@link BenchClient.Stream}; {@code --stream-patterns} picks them): one connection writing messages of that
 * size while the channel is writable, to a sink that counts them, with the CPU and heap per message of the
 * writer's and the sink's loop threads. With {@code --repeat} every row is measured that many
 * times on fresh loops and the median kept. {@code --floor} gives the raw-verbs round trips (µs) measured by
 * {@code floor pingpong} in the same run; {@code --floor-command} runs that program itself at the start of every
 * repeat, so that each ratio is taken within a repeat ({@code microbench/in-process.sh} does this); {@code --out}
 * writes the table with the ratios and goals of issue 14 as markdown.
 *
 * <p>With {@code --floor-command}, every repeat also measures the echo with both ends on ONE loop thread (RdmaChannel
 * busy-poll) against {@code floor pingpong -o} (both QPs on one thread): the round trip is then the whole CPU cost of
 * the echo in sequence, with no exchange between cores, whose speed on a shared VM changes from one minute to the
 * next; the ratio is the transport's cost per echo over the verbs' alone. {@code --one-loop-sizes ''} leaves it out.
 */
public final class InProcessEcho {
    private static final java.util.regex.Pattern FLOOR_ROUND_TRIP =
            java.util.regex.Pattern.compile("\\(round trip p50 ([0-9.]+) us\\)");

    private InProcessEcho() {
    }

    /** One measured streaming row. */
    record StreamRow(String transport, int size, boolean fresh, double messagesPerSecond, double writerCpuNanos,
                     double sinkCpuNanos, double writerHeapBytes, double sinkHeapBytes) {
        String line() {
            return String.format(Locale.ROOT, "%-15s %7d B  stream %-6s %6.3f M msg/s  %8.1f MB/s  cpu/msg writer %5.0f"
                    + " ns sink %5.0f ns  heap/msg writer %5.1f B sink %5.1f B", transport, size, pattern(fresh),
                    messagesPerSecond / 1e6, messagesPerSecond * size / 1e6, writerCpuNanos, sinkCpuNanos,
                    writerHeapBytes, sinkHeapBytes);
        }
    }

    static String pattern(boolean fresh) {
        return fresh ? "fresh" : "slices";
    }

    /** The echo with both ends on one thread: raw verbs, RdmaChannel, and the median of their ratios. */
    record OneLoopRow(int size, double floorMicros, double p50Micros, double ratio) {
        String line() {
            return String.format(Locale.ROOT, "one thread %7d B  raw verbs p50 %6.2f us  rdma-busy-poll p50 %6.2f us"
                    + "  (%.2fx)", size, floorMicros, p50Micros, ratio);
        }
    }

    private static long sum(List<LoopThreads> loops, java.util.function.ToLongFunction<LoopThreads> value) {
        long sum = 0;
        for (LoopThreads l : loops) {
            sum += value.applyAsLong(l);
        }
        return sum;
    }

    private static int[] sizesOf(String list) {
        String[] s = list.isEmpty() ? new String[0] : list.split(",");
        int[] sizes = new int[s.length];
        for (int j = 0; j < s.length; j++) {
            sizes[j] = Integer.parseInt(s[j]);
        }
        return sizes;
    }

    /** One measured row. */
    record Row(String transport, int size, double p50Micros, double p99Micros, double cpuMicrosPerEcho,
               double sleepsPerEcho, double heapBytesPerEcho, long echoes) {
        String line() {
            return String.format(Locale.ROOT, "%-15s %7d B  p50 %8.2f us  p99 %8.2f us  cpu/echo %7.2f us  "
                    + "sleeps/echo %5.2f  heap/echo %6.1f B  (%d echoes)", transport, size, p50Micros, p99Micros,
                    cpuMicrosPerEcho, sleepsPerEcho, heapBytesPerEcho, echoes);
        }
    }

    public static void main(String[] args) throws Exception {
        List<Transport> transports = List.of(Transport.RDMA_BUSY_POLL, Transport.RDMA_ADAPTIVE, Transport.EPOLL);
        int[] sizes = {64, 4096, 65536};
        long warmup = 50_000;
        long count = 200_000;
        int[] streamSizes = {64, 1024};
        boolean[] patterns = {false, true};
        int[] oneLoopSizes = null;
        int repeat = 1;
        java.util.Map<Integer, Double> floor = new java.util.TreeMap<>();
        String out = null;
        String floorCommand = null;
        String floorLibraries = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--transports" -> {
                    List<Transport> list = new ArrayList<>();
                    for (String t : args[++i].isEmpty() ? new String[0] : args[i].split(",")) {
                        list.add(Transport.of(t));
                    }
                    transports = list;
                }
                case "--sizes" -> sizes = sizesOf(args[++i]);
                case "--stream-sizes" -> streamSizes = sizesOf(args[++i]);
                case "--stream-patterns" -> patterns = patternsOf(args[++i]);
                case "--one-loop-sizes" -> oneLoopSizes = sizesOf(args[++i]);
                case "--repeat" -> repeat = Integer.parseInt(args[++i]);
                case "--out" -> out = args[++i];
                case "--floor" -> {
                    for (String pair : args[++i].split(",")) {
                        String[] kv = pair.split("=");
                        floor.put(Integer.parseInt(kv[0]), Double.parseDouble(kv[1]));
                    }
                }
                case "--floor-command" -> floorCommand = args[++i];
                case "--floor-libraries" -> floorLibraries = args[++i];
                case "--warmup" -> warmup = Long.parseLong(args[++i]);
                case "--count" -> count = Long.parseLong(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (oneLoopSizes == null) {
            oneLoopSizes = floorCommand == null ? new int[0] : sizes;
        }
        // Repeats interleave the floor and the transports: on a shared VM the speed of the two cores' exchange
        // changes by several times from one minute to the next, so each ratio is taken within one repeat, from rows
        // measured a few seconds apart, and the page shows the median of those ratios.
        java.util.Map<Transport, List<List<Row>>> runsOf = new java.util.LinkedHashMap<>();
        for (Transport t : transports) {
            runsOf.put(t, new ArrayList<>());
        }
        List<java.util.Map<Integer, Double>> floorRuns = new ArrayList<>();
        List<java.util.Map<Integer, Double>> oneThreadFloorRuns = new ArrayList<>();
        List<List<Row>> oneLoopRuns = new ArrayList<>();
        for (int r = 0; r < repeat; r++) {
            if (floorCommand != null && oneLoopSizes.length > 0) {
                java.util.Map<Integer, Double> f = floor(floorCommand, floorLibraries, oneLoopSizes, true);
                System.out.println("raw verbs, one thread (repeat " + (r + 1) + "): " + f);
                oneThreadFloorRuns.add(f);
                oneLoopRuns.add(run(Transport.RDMA_BUSY_POLL, oneLoopSizes, warmup, count, true));
            }
            if (floorCommand != null) {
                java.util.Map<Integer, Double> f = floor(floorCommand, floorLibraries, sizes, false);
                System.out.println("raw verbs (repeat " + (r + 1) + "): " + f);
                floorRuns.add(f);
            }
            for (Transport t : transports) {
                runsOf.get(t).add(run(t, sizes, warmup, count, false));
            }
        }
        if (!floorRuns.isEmpty()) {
            for (int size : sizes) {
                floor.put(size, median(floorRuns.stream().map(f -> f.get(size)).toList()));
            }
        }
        java.util.Map<Integer, Double> busyOverFloor = new java.util.TreeMap<>();
        java.util.Map<Integer, Double> adaptiveOverBusy = new java.util.TreeMap<>();
        List<List<Row>> busyRuns = runsOf.get(Transport.RDMA_BUSY_POLL);
        List<List<Row>> adaptiveRuns = runsOf.get(Transport.RDMA_ADAPTIVE);
        for (int j = 0; j < sizes.length; j++) {
            List<Double> overFloor = new ArrayList<>();
            List<Double> overBusy = new ArrayList<>();
            for (int r = 0; r < repeat; r++) {
                if (busyRuns != null && !floorRuns.isEmpty()) {
                    overFloor.add(busyRuns.get(r).get(j).p50Micros / floorRuns.get(r).get(sizes[j]));
                }
                if (busyRuns != null && adaptiveRuns != null) {
                    overBusy.add(adaptiveRuns.get(r).get(j).p50Micros / busyRuns.get(r).get(j).p50Micros);
                }
            }
            if (!overFloor.isEmpty()) {
                busyOverFloor.put(sizes[j], median(overFloor));
            }
            if (!overBusy.isEmpty()) {
                adaptiveOverBusy.put(sizes[j], median(overBusy));
            }
        }
        List<Row> rows = new ArrayList<>();
        for (Transport t : transports) {
            List<List<Row>> runs = runsOf.get(t);
            for (int j = 0; j < sizes.length; j++) {
                int at = j;
                List<Row> same = new ArrayList<>(runs.stream().map(l -> l.get(at)).toList());
                same.sort(java.util.Comparator.comparingDouble(Row::p50Micros));
                Row median = same.get(same.size() / 2);
                rows.add(median);
                System.out.println(median.line());
            }
        }
        List<OneLoopRow> oneLoopRows = new ArrayList<>();
        for (int j = 0; j < oneLoopSizes.length && !oneLoopRuns.isEmpty(); j++) {
            int at = j;
            int size = oneLoopSizes[j];
            List<Double> ratios = new ArrayList<>();
            for (int r = 0; r < oneLoopRuns.size(); r++) {
                ratios.add(oneLoopRuns.get(r).get(at).p50Micros / oneThreadFloorRuns.get(r).get(size));
            }
            OneLoopRow row = new OneLoopRow(size, median(oneThreadFloorRuns.stream().map(f -> f.get(size)).toList()),
                    median(oneLoopRuns.stream().map(l -> l.get(at).p50Micros).toList()), median(ratios));
            oneLoopRows.add(row);
            System.out.println(row.line());
        }
        List<StreamRow> streamRows = new ArrayList<>();
        for (Transport t : transports) {
            List<List<StreamRow>> runs = new ArrayList<>();
            for (int r = 0; r < repeat; r++) {
                runs.add(stream(t, streamSizes, patterns));
            }
            for (int j = 0; j < runs.getFirst().size(); j++) {
                int at = j;
                List<StreamRow> same = new ArrayList<>(runs.stream().map(l -> l.get(at)).toList());
                same.sort(java.util.Comparator.comparingDouble(StreamRow::messagesPerSecond));
                StreamRow median = same.get(same.size() / 2);
                streamRows.add(median);
                System.out.println(median.line());
            }
        }
        if (out != null) {
            java.nio.file.Files.writeString(java.nio.file.Path.of(out), page(rows, oneLoopRows, streamRows, floor,
                    busyOverFloor, adaptiveOverBusy, sizes, streamSizes, repeat));
        }
    }

    /** "slices,fresh" and either alone: the stream patterns to measure, in that order. */
    private static boolean[] patternsOf(String list) {
        List<String> names = List.of(list.split(","));
        for (String name : names) {
            if (!name.equals(pattern(false)) && !name.equals(pattern(true))) {
                throw new IllegalArgumentException("--stream-patterns: " + name + " (expected: slices, fresh)");
            }
        }
        boolean slices = names.contains(pattern(false));
        boolean fresh = names.contains(pattern(true));
        return slices && fresh ? new boolean[] {false, true} : new boolean[] {fresh};
    }

    private static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(null);
        return sorted.get(sorted.size() / 2);
    }

    /**
     * Runs {@code floor pingpong} for each size (the raw-verbs floor, two threads of one C process) and returns
     * its round trip p50 in µs by size.
     */
    static java.util.Map<Integer, Double> floor(String command, String libraries, int[] sizes, boolean oneThread)
            throws Exception {
        java.util.Map<Integer, Double> result = new java.util.TreeMap<>();
        for (int size : sizes) {
            List<String> argv = new ArrayList<>(List.of(command, "pingpong", "-n", "200000", "-s",
                    Integer.toString(size)));
            if (oneThread) {
                argv.add("-o");
            }
            ProcessBuilder pb = new ProcessBuilder(argv).redirectErrorStream(true);
            if (libraries != null) {
                pb.environment().put("LD_LIBRARY_PATH", libraries);
            }
            Process process = pb.start();
            String output = new String(process.getInputStream().readAllBytes());
            if (!process.waitFor(120, TimeUnit.SECONDS) || process.exitValue() != 0) {
                throw new IllegalStateException(command + " pingpong -s " + size + " failed: " + output);
            }
            result.put(size, roundTripMicros(output));
        }
        return result;
    }

    /**
     * The whole round trip's p50 (µs) in the output of {@code floor pingpong}, which prints the half round trip
     * first: "half round trip p50 H us ... (round trip p50 R us)". The echo rows are whole round trips.
     */
    static double roundTripMicros(String output) {
        java.util.regex.Matcher m = FLOOR_ROUND_TRIP.matcher(output);
        if (!m.find()) {
            throw new IllegalStateException("no \"(round trip p50 ... us)\" in the output of floor pingpong: " + output);
        }
        return Double.parseDouble(m.group(1));
    }

    private static Row row(List<Row> rows, Transport t, int size) {
        return rows.stream().filter(r -> r.transport.equals(t.key()) && r.size == size).findFirst().orElse(null);
    }

    private static StreamRow streamRow(List<StreamRow> rows, Transport t, int size, boolean fresh) {
        return rows.stream().filter(r -> r.transport.equals(t.key()) && r.size == size && r.fresh == fresh)
                .findFirst().orElse(null);
    }

    private static String times(double ratio) {
        return String.format(Locale.ROOT, "%.2f×", ratio);
    }

    private static String ratio(double a, double b) {
        return b > 0 ? String.format(Locale.ROOT, "%.2f×", a / b) : "–";
    }

    private static String micros(Row r) {
        return r == null ? "–" : String.format(Locale.ROOT, "%.2f", r.p50Micros);
    }

    /** The markdown page: echo p50 with the ratios the issue sets goals for, then streaming rates. */
    static String page(List<Row> rows, List<OneLoopRow> oneLoopRows, List<StreamRow> streamRows,
                       java.util.Map<Integer, Double> floor,
                       java.util.Map<Integer, Double> busyOverFloor, java.util.Map<Integer, Double> adaptiveOverBusy,
                       int[] sizes, int[] streamSizes, int repeat) {
        StringBuilder b = new StringBuilder();
        b.append("""
                # In-process benchmarks

                Written by `microbench/in-process.sh` (`InProcessEcho` and `native/tests/floor pingpong`); do not edit
                by hand. Two event loops of ONE JVM (or two threads of one C process for raw verbs) on the software
                device, whose data path is then a function call and a `memcpy`: what remains is the transport's own
                cost per message. Echo: one message at a time, the client waits for every byte before sending again
                (the same buffer every time); raw verbs is `floor pingpong`'s whole round trip, not the half round
                trip it prints first. Stream: one connection writing messages of the size while writable, to a
                sink; "slices": retained slices of one buffer with void promises, flushed when the channel turns
                unwritable (the floor); "fresh": as applications write, each message a fresh `ctx.alloc().buffer()`
                carrying its sequence number (checked by the sink) with its own promise, a flush every 64 writes. Values are the median of the repeats. Each repeat measures the raw
                verbs floor and then each transport, a few seconds apart: the ratios are the median of the ratios
                within a repeat (on this shared 2-core VM the exchange between the two cores changes speed by several
                times from one minute to the next, which ratios of medians taken minutes apart would mix up).

                Goals (issue 14): busy-poll ≤ 1.15× raw verbs at 64 B and ≤ 1.3× at 4 KiB and 64 KiB; adaptive ≤ 1.3×
                busy-poll at every size; 64 B streaming ≥ Netty epoll.

                | echo p50 round trip (µs) | raw verbs | RdmaChannel busy-poll | ÷ raw verbs | RdmaChannel adaptive | ÷ busy-poll | adaptive sleeps/echo | Netty epoll |
                | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
                """);
        for (int size : sizes) {
            Row busy = row(rows, Transport.RDMA_BUSY_POLL, size);
            Row adaptive = row(rows, Transport.RDMA_ADAPTIVE, size);
            Row epoll = row(rows, Transport.EPOLL, size);
            Double f = floor.get(size);
            b.append("| ").append(size).append(" B | ").append(f == null ? "–" : String.format(Locale.ROOT, "%.2f", f))
                    .append(" | ").append(micros(busy)).append(" | ")
                    .append(busyOverFloor.containsKey(size) ? times(busyOverFloor.get(size))
                            : busy == null || f == null ? "–" : ratio(busy.p50Micros, f)).append(" | ")
                    .append(micros(adaptive)).append(" | ")
                    .append(adaptiveOverBusy.containsKey(size) ? times(adaptiveOverBusy.get(size))
                            : busy == null || adaptive == null ? "–" : ratio(adaptive.p50Micros, busy.p50Micros))
                    .append(" | ").append(adaptive == null ? "–"
                            : String.format(Locale.ROOT, "%.3f", adaptive.sleepsPerEcho))
                    .append(" | ").append(micros(epoll)).append(" |\n");
        }
        if (!oneLoopRows.isEmpty()) {
            b.append("""

                    Both ends on ONE thread (RdmaChannel busy-poll: server and client channels on one event loop; raw
                    verbs: `floor pingpong -o`, both queue pairs polled in turn by one thread): the round trip is the
                    whole CPU cost of the echo in sequence, with no exchange between cores, so this ratio is the
                    transport's cost per echo over the verbs' alone. It still moves between runs (RdmaChannel's 64 B
                    round trip has been 1.6 to 3.4 µs here, one JVM to the next): compare within a run.

                    | echo p50 round trip on one thread (µs) | raw verbs | RdmaChannel | ÷ raw verbs |
                    | --- | ---: | ---: | ---: |
                    """);
            for (OneLoopRow r : oneLoopRows) {
                b.append(String.format(Locale.ROOT, "| %d B | %.2f | %.2f | %.2f× |%n", r.size, r.floorMicros,
                        r.p50Micros, r.ratio));
            }
        }
        b.append("""

                | stream (M msg/s) | pattern | RdmaChannel busy-poll | RdmaChannel adaptive | Netty epoll | adaptive ÷ epoll |
                | --- | --- | ---: | ---: | ---: | ---: |
                """);
        for (int size : streamSizes) {
            for (boolean fresh : new boolean[] {false, true}) {
                StreamRow busy = streamRow(streamRows, Transport.RDMA_BUSY_POLL, size, fresh);
                StreamRow adaptive = streamRow(streamRows, Transport.RDMA_ADAPTIVE, size, fresh);
                StreamRow epoll = streamRow(streamRows, Transport.EPOLL, size, fresh);
                b.append("| ").append(size).append(" B | ").append(pattern(fresh)).append(" | ")
                        .append(busy == null ? "–" : String.format(Locale.ROOT, "%.3f", busy.messagesPerSecond / 1e6))
                        .append(" | ")
                        .append(adaptive == null ? "–"
                                : String.format(Locale.ROOT, "%.3f", adaptive.messagesPerSecond / 1e6))
                        .append(" | ")
                        .append(epoll == null ? "–" : String.format(Locale.ROOT, "%.3f", epoll.messagesPerSecond / 1e6))
                        .append(" | ").append(adaptive == null || epoll == null ? "–"
                                : ratio(adaptive.messagesPerSecond, epoll.messagesPerSecond)).append(" |\n");
            }
        }
        b.append("\nRepeats: ").append(repeat).append(". CPU per echo (both loops), p99 and heap per echo are in the"
                + " script's output.\n");
        return b.toString();
    }

    /**
     * For each size and pattern ({@code false}: slices, {@code true}: fresh): warms up for 2 s, then measures
     * messages/s over about 2 s.
     */
    static List<StreamRow> stream(Transport transport, int[] sizes, boolean[] patterns) throws Exception {
        LoopThreads sinkThreads = new LoopThreads(transport.key() + "-sink");
        LoopThreads writerThreads = new LoopThreads(transport.key() + "-writer");
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, sinkThreads, transport.ioHandlerFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, writerThreads, transport.ioHandlerFactory());
        List<StreamRow> rows = new ArrayList<>();
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(transport.serverChannel())
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            BenchServer.SinkHandler.addTo(ch.pipeline());
                        }
                    })
                    .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
            Channel client = new Bootstrap().group(clientGroup).channel(transport.channel())
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(1 << 20, 4 << 20))
                    .handler(new BenchClient.Stream())
                    .connect(server.localAddress()).sync().channel();
            BenchClient.Stream stream = client.pipeline().get(BenchClient.Stream.class);
            for (int size : sizes) {
                for (boolean fresh : patterns) {
                    long perRound = 1024;
                    double rate;
                    long warmupEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
                    do {
                        rate = perRound / (round(stream, size, perRound, fresh) / 1e9);
                        perRound = Math.min(perRound * 2, 1L << 26);
                    } while (System.nanoTime() < warmupEnd);
                    long n = Math.max(1024, (long) (rate * 2));
                    long writerCpu = writerThreads.cpuNanos();
                    long sinkCpu = sinkThreads.cpuNanos();
                    long writerHeap = writerThreads.allocatedBytes();
                    long sinkHeap = sinkThreads.allocatedBytes();
                    double perSecond = n / (round(stream, size, n, fresh) / 1e9);
                    rows.add(new StreamRow(transport.key(), size, fresh, perSecond,
                            (double) (writerThreads.cpuNanos() - writerCpu) / n,
                            (double) (sinkThreads.cpuNanos() - sinkCpu) / n,
                            (double) (writerThreads.allocatedBytes() - writerHeap) / n,
                            (double) (sinkThreads.allocatedBytes() - sinkHeap) / n));
                }
            }
            if (client instanceof io.netty.contrib.channel.rdma.RdmaChannel rdma) {
                System.out.println(transport.key() + " writer: " + rdma.metric());
            }
            client.close().sync();
            server.close().sync();
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        return rows;
    }

    private static long round(BenchClient.Stream stream, int size, long count, boolean fresh) throws Exception {
        long start = System.nanoTime();
        Promise<Long> ack = stream.start(size, count, fresh);
        if (!ack.await(120, TimeUnit.SECONDS)) {
            throw new IllegalStateException("stream of " + count + " messages not acknowledged in 120 s");
        }
        return ack.get() - start;
    }

    /**
     * Measures {@code count} echoes of each size after {@code warmup} echoes, on two fresh loops, or with {@code
     * oneLoop} on one fresh loop that serves both ends.
     */
    static List<Row> run(Transport transport, int[] sizes, long warmup, long count, boolean oneLoop)
            throws Exception {
        String name = oneLoop ? transport.key() + "-one-loop" : transport.key();
        LoopThreads serverThreads = new LoopThreads(name + (oneLoop ? "" : "-server"));
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, serverThreads, transport.ioHandlerFactory());
        LoopThreads clientThreads = oneLoop ? null : new LoopThreads(name + "-client");
        EventLoopGroup clientGroup = oneLoop ? serverGroup
                : new MultiThreadIoEventLoopGroup(1, clientThreads, transport.ioHandlerFactory());
        List<LoopThreads> loops = oneLoop ? List.of(serverThreads) : List.of(serverThreads, clientThreads);
        List<Row> rows = new ArrayList<>();
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(transport.serverChannel())
                    .childHandler(BenchServer.EchoHandler.INSTANCE)
                    .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
            Channel client = new Bootstrap().group(clientGroup).channel(transport.channel())
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(1 << 20, 4 << 20))
                    .handler(new BenchClient.PingPong())
                    .connect(server.localAddress()).sync().channel();
            BenchClient.PingPong pingPong = client.pipeline().get(BenchClient.PingPong.class);
            for (int size : sizes) {
                pingPong.prepare(size);
                pingPong.run(null, TimeUnit.SECONDS.toNanos(60), warmup);
                Histogram histogram = new Histogram(BenchClient.MAX_RTT_NANOS, 3);
                long cpu = sum(loops, LoopThreads::cpuNanos);
                long sleeps = sum(loops, LoopThreads::sleeps);
                long heap = sum(loops, LoopThreads::allocatedBytes);
                long echoes = pingPong.run(histogram, TimeUnit.SECONDS.toNanos(60), count);
                cpu = sum(loops, LoopThreads::cpuNanos) - cpu;
                sleeps = sum(loops, LoopThreads::sleeps) - sleeps;
                heap = sum(loops, LoopThreads::allocatedBytes) - heap;
                rows.add(new Row(name, size, histogram.getValueAtPercentile(50) / 1e3,
                        histogram.getValueAtPercentile(99) / 1e3, cpu / 1e3 / echoes, (double) sleeps / echoes,
                        (double) heap / echoes, echoes));
            }
            client.close().sync();
            server.close().sync();
        } finally {
            if (clientGroup != serverGroup) {
                clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            }
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        return rows;
    }
}
