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
 * [--count N] [--stream-sizes 64,1024]}: one line per transport and size with p50 / p99 round trip, CPU and sleeps
 * per echo of both loops; then one line per transport and streaming size: one connection writing messages of that
 * size, each its own buffer, while the channel is writable (a flush per batch), to a sink that counts them.
 */
public final class InProcessEcho {
    private InProcessEcho() {
    }

    /** One measured streaming row. */
    record StreamRow(String transport, int size, double messagesPerSecond) {
        String line() {
            return String.format(Locale.ROOT, "%-15s %7d B  stream %6.3f M msg/s  %8.1f MB/s", transport, size,
                    messagesPerSecond / 1e6, messagesPerSecond * size / 1e6);
        }
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
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--transports" -> {
                    List<Transport> list = new ArrayList<>();
                    for (String t : args[++i].split(",")) {
                        list.add(Transport.of(t));
                    }
                    transports = list;
                }
                case "--sizes" -> {
                    String[] s = args[++i].split(",");
                    sizes = new int[s.length];
                    for (int j = 0; j < s.length; j++) {
                        sizes[j] = Integer.parseInt(s[j]);
                    }
                }
                case "--stream-sizes" -> {
                    String[] s = args[++i].split(",");
                    streamSizes = new int[s.length];
                    for (int j = 0; j < s.length; j++) {
                        streamSizes[j] = Integer.parseInt(s[j]);
                    }
                }
                case "--warmup" -> warmup = Long.parseLong(args[++i]);
                case "--count" -> count = Long.parseLong(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        for (Transport t : transports) {
            for (Row row : run(t, sizes, warmup, count)) {
                System.out.println(row.line());
            }
        }
        for (Transport t : transports) {
            for (StreamRow row : stream(t, streamSizes)) {
                System.out.println(row.line());
            }
        }
    }

    /** For each size: warms up for 2 s, then measures messages per second over about 2 s. */
    static List<StreamRow> stream(Transport transport, int[] sizes) throws Exception {
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, transport.ioHandlerFactory());
        List<StreamRow> rows = new ArrayList<>();
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(transport.serverChannel())
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new BenchServer.SinkHandler());
                        }
                    })
                    .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
            Channel client = new Bootstrap().group(clientGroup).channel(transport.channel())
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(1 << 20, 4 << 20))
                    .handler(new BenchClient.Stream())
                    .connect(server.localAddress()).sync().channel();
            BenchClient.Stream stream = client.pipeline().get(BenchClient.Stream.class);
            for (int size : sizes) {
                long perRound = 1024;
                double rate;
                long warmupEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
                do {
                    rate = perRound / (round(stream, size, perRound) / 1e9);
                    perRound = Math.min(perRound * 2, 1L << 26);
                } while (System.nanoTime() < warmupEnd);
                long n = Math.max(1024, (long) (rate * 2));
                rows.add(new StreamRow(transport.key(), size, n / (round(stream, size, n) / 1e9)));
            }
            client.close().sync();
            server.close().sync();
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        return rows;
    }

    private static long round(BenchClient.Stream stream, int size, long count) throws Exception {
        long start = System.nanoTime();
        Promise<Long> ack = stream.start(size, count);
        if (!ack.await(120, TimeUnit.SECONDS)) {
            throw new IllegalStateException("stream of " + count + " messages not acknowledged in 120 s");
        }
        return ack.get() - start;
    }

    /** Measures {@code count} echoes of each size after {@code warmup} echoes, on two fresh loops. */
    static List<Row> run(Transport transport, int[] sizes, long warmup, long count) throws Exception {
        LoopThreads serverThreads = new LoopThreads(transport.key() + "-server");
        LoopThreads clientThreads = new LoopThreads(transport.key() + "-client");
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, serverThreads, transport.ioHandlerFactory());
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, clientThreads, transport.ioHandlerFactory());
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
                long cpu = serverThreads.cpuNanos() + clientThreads.cpuNanos();
                long sleeps = serverThreads.sleeps() + clientThreads.sleeps();
                long heap = serverThreads.allocatedBytes() + clientThreads.allocatedBytes();
                long echoes = pingPong.run(histogram, TimeUnit.SECONDS.toNanos(60), count);
                cpu = serverThreads.cpuNanos() + clientThreads.cpuNanos() - cpu;
                sleeps = serverThreads.sleeps() + clientThreads.sleeps() - sleeps;
                heap = serverThreads.allocatedBytes() + clientThreads.allocatedBytes() - heap;
                rows.add(new Row(transport.key(), size, histogram.getValueAtPercentile(50) / 1e3,
                        histogram.getValueAtPercentile(99) / 1e3, cpu / 1e3 / echoes, (double) sleeps / echoes,
                        (double) heap / echoes, echoes));
            }
            client.close().sync();
            server.close().sync();
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        return rows;
    }
}
