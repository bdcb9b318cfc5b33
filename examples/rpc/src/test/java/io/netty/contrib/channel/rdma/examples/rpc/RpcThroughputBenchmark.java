package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.netty.contrib.channel.rdma.RdmaServerChannel;

import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * gRPC (grpc-netty, default settings) over RdmaChannel against NIO, one JVM, the same workload in the same run:
 * unary Echo calls under 4 KiB, with a call of 1-8 MiB after every {@code largeEvery} of them, every response
 * checked. Prints large-message throughput and small-call latency (p50, mean, p99) for both and their ratios; each
 * round runs RDMA and NIO one after the other, so each ratio is taken between measurements seconds apart. A
 * benchmark, not a test: run it with {@code ./examples/rpc/benchmark.sh} (rounds, small calls per round, one large
 * call after every how many small ones, and optionally the RDMA loops' spin in ns as arguments). A round's mean
 * needs thousands of small calls to be stable (300 moved it by a fifth between runs).
 */
public final class RpcThroughputBenchmark {
    private RpcThroughputBenchmark() {
    }

    record Result(double largeMBps, double smallP50Micros, double smallMeanMicros, double smallP99Micros) {
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        int smallCalls = args.length > 1 ? Integer.parseInt(args[1]) : 5000;
        int largeEvery = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        if (args.length > 3) {
            spinNanos = Long.parseLong(args[3]);
        }
        SoftwareDevice.selectIfNoHardware();
        for (int round = 0; round <= rounds; round++) {
            Result rdma = run(true, smallCalls, largeEvery);
            Result nio = run(false, smallCalls, largeEvery);
            if (round == 0) {
                continue; // warm-up
            }
            System.out.printf("round %d (%d small calls, one large after every %d): large MB/s rdma %.0f nio %.0f"
                            + " (%.2fx); small p50 µs rdma %.0f nio %.0f (%.2fx); small mean µs rdma %.0f nio %.0f"
                            + " (%.2fx); small p99 µs rdma %.0f nio %.0f (%.2fx)%n", round, smallCalls, largeEvery,
                    rdma.largeMBps, nio.largeMBps, rdma.largeMBps / nio.largeMBps, rdma.smallP50Micros,
                    nio.smallP50Micros, rdma.smallP50Micros / nio.smallP50Micros, rdma.smallMeanMicros,
                    nio.smallMeanMicros, rdma.smallMeanMicros / nio.smallMeanMicros, rdma.smallP99Micros,
                    nio.smallP99Micros, rdma.smallP99Micros / nio.smallP99Micros);
        }
    }

    static Result run(boolean rdma, int smallCalls, int largeEvery) throws Exception {
        EventLoopGroup boss = group(rdma);
        EventLoopGroup workers = group(rdma);
        EventLoopGroup client = group(rdma);
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .channelType(rdma ? RdmaServerChannel.class : NioServerSocketChannel.class)
                .bossEventLoopGroup(boss).workerEventLoopGroup(workers)
                .maxInboundMessageSize(RpcClient.MAX_MESSAGE_SIZE)
                .addService(EchoService.definition()).build().start();
        ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1", server.getPort())
                .channelType(rdma ? RdmaChannel.class : NioSocketChannel.class)
                .eventLoopGroup(client).usePlaintext().maxInboundMessageSize(RpcClient.MAX_MESSAGE_SIZE).build();
        try {
            Random random = new Random(7);
            long largeBytes = 0;
            long largeNanos = 0;
            long[] small = new long[smallCalls];
            int smallCount = 0;
            int calls = smallCalls + smallCalls / largeEvery;
            for (int i = 0; i < calls; i++) {
                boolean large = i % (largeEvery + 1) == largeEvery;
                int size = large ? (1 << 20) + random.nextInt(7 << 20) : 1 + random.nextInt(4095);
                Payload request = RpcClient.payload(i, size);
                long start = System.nanoTime();
                Payload response = ClientCalls.blockingUnaryCall(channel, EchoService.ECHO,
                        CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS), request);
                long nanos = System.nanoTime() - start;
                if (response.sequence() != i || !Arrays.equals(response.body(), request.body())) {
                    throw new IllegalStateException("call " + i + " echoed something else");
                }
                if (large) {
                    largeBytes += 2L * size;
                    largeNanos += nanos;
                } else {
                    small[smallCount++] = nanos;
                }
            }
            long[] sorted = Arrays.copyOf(small, smallCount);
            Arrays.sort(sorted);
            return new Result(largeBytes / (largeNanos / 1e9) / 1e6, sorted[smallCount / 2] / 1e3,
                    Arrays.stream(sorted).average().orElse(0) / 1e3, sorted[(int) (smallCount * 0.99)] / 1e3);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            boss.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            workers.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            client.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** The RDMA loops' spin ({@link RdmaIoHandlerConfig#spinNanos}); -1: the default. */
    private static long spinNanos = -1;

    private static EventLoopGroup group(boolean rdma) {
        if (rdma && spinNanos >= 0) {
            return new MultiThreadIoEventLoopGroup(1,
                    RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().spinNanos(spinNanos)));
        }
        return new MultiThreadIoEventLoopGroup(1, rdma ? RdmaIoHandler.newFactory() : NioIoHandler.newFactory());
    }
}
