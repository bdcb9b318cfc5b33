package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
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

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * gRPC (grpc-netty, default settings) over RdmaChannel against NIO, one JVM, the same workload in the same run:
 * unary Echo calls under 4 KiB, with a call of 1-8 MiB after every {@code largeEvery} of them, every response
 * checked. Prints large-message throughput and small-call latency (p50, mean, p99) for both and their ratios; each
 * round runs RDMA and NIO one after the other (which goes first alternates), so each ratio is taken between
 * measurements seconds apart. A benchmark, not a test: run it with {@code ./examples/rpc/benchmark.sh} (rounds,
 * small calls per round, one large call after every how many small ones, and optionally the RDMA loops' spin in ns
 * as arguments). A round's mean needs thousands of small calls to be stable (300 moved it by a fifth between runs).
 * With {@code --two-jvms} anywhere among the arguments the RDMA and the NIO server each run in a JVM of their own
 * (started once, same classpath, the same {@code -D} options), the client in this one. The last line gives the
 * median over the rounds of each round's ratio. With {@code -Drpc.segments=true} each round also prints the median
 * of each half of a small call: from the caller to the service (on the server's executor) and back, stamped by
 * interceptors with {@code System.nanoTime()}, which is one clock for every JVM of the machine.
 */
public final class RpcThroughputBenchmark {
    private RpcThroughputBenchmark() {
    }

    record Result(double largeMBps, double smallP50Micros, double smallMeanMicros, double smallP99Micros) {
    }

    public static void main(String[] arguments) throws Exception {
        if (arguments.length >= 2 && arguments[0].equals("serve")) {
            serve(arguments[1].equals("rdma"), arguments.length > 2 ? Long.parseLong(arguments[2]) : -1);
            return;
        }
        boolean twoJvms = Arrays.asList(arguments).contains("--two-jvms");
        String[] args = Arrays.stream(arguments).filter(a -> !a.equals("--two-jvms")).toArray(String[]::new);
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        int smallCalls = args.length > 1 ? Integer.parseInt(args[1]) : 5000;
        int largeEvery = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        if (args.length > 3) {
            spinNanos = Long.parseLong(args[3]);
        }
        SoftwareDevice.selectIfNoHardware();
        ServerProcess rdmaServer = twoJvms ? ServerProcess.start(true) : null;
        ServerProcess nioServer = twoJvms ? ServerProcess.start(false) : null;
        try {
            rounds(rounds, smallCalls, largeEvery, rdmaServer, nioServer);
        } finally {
            if (twoJvms) {
                rdmaServer.stop();
                nioServer.stop();
            }
        }
    }

    private static void rounds(int rounds, int smallCalls, int largeEvery, ServerProcess rdmaServer,
                               ServerProcess nioServer) throws Exception {
        boolean twoJvms = rdmaServer != null;
        List<Double> p50Ratios = new ArrayList<>();
        List<Double> meanRatios = new ArrayList<>();
        for (int round = 0; round <= rounds; round++) {
            // Which transport goes first alternates, so that a machine whose speed drifts within minutes does not
            // favour the same transport in every round.
            boolean rdmaFirst = round % 2 == 0;
            Result first = measure(rdmaFirst, twoJvms, rdmaServer, nioServer, smallCalls, largeEvery);
            Result second = measure(!rdmaFirst, twoJvms, rdmaServer, nioServer, smallCalls, largeEvery);
            Result rdma = rdmaFirst ? first : second;
            Result nio = rdmaFirst ? second : first;
            if (round == 0) {
                continue; // warm-up
            }
            p50Ratios.add(rdma.smallP50Micros / nio.smallP50Micros);
            meanRatios.add(rdma.smallMeanMicros / nio.smallMeanMicros);
            System.out.printf("round %d (%s, %s first, %d small calls, one large after every %d): large MB/s"
                            + " rdma %.0f nio %.0f (%.2fx); small p50 µs rdma %.0f nio %.0f (%.2fx); small mean µs"
                            + " rdma %.0f nio %.0f (%.2fx); small p99 µs rdma %.0f nio %.0f (%.2fx)%n", round,
                    twoJvms ? "server in its own JVM" : "one JVM", rdmaFirst ? "rdma" : "nio", smallCalls,
                    largeEvery, rdma.largeMBps, nio.largeMBps, rdma.largeMBps / nio.largeMBps, rdma.smallP50Micros,
                    nio.smallP50Micros, rdma.smallP50Micros / nio.smallP50Micros, rdma.smallMeanMicros,
                    nio.smallMeanMicros, rdma.smallMeanMicros / nio.smallMeanMicros, rdma.smallP99Micros,
                    nio.smallP99Micros, rdma.smallP99Micros / nio.smallP99Micros);
        }
        if (rounds > 0) {
            // Each round's ratio compares rows measured seconds apart; their median is what to go by on a machine
            // whose speed drifts from one minute to the next.
            System.out.printf("median of %d rounds: small p50 rdma/nio %.2fx, small mean %.2fx%n", rounds,
                    median(p50Ratios), median(meanRatios));
        }
    }

    private static double median(List<Double> values) {
        List<Double> sorted = values.stream().sorted().toList();
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private static Result measure(boolean rdma, boolean twoJvms, ServerProcess rdmaServer, ServerProcess nioServer,
                                  int smallCalls, int largeEvery) throws Exception {
        if (twoJvms) {
            return calls(rdma, (rdma ? rdmaServer : nioServer).port, smallCalls, largeEvery);
        }
        return run(rdma, smallCalls, largeEvery);
    }

    static Result run(boolean rdma, int smallCalls, int largeEvery) throws Exception {
        EventLoopGroup boss = group(rdma);
        EventLoopGroup workers = group(rdma);
        Server server = startServer(rdma, boss, workers);
        try {
            return calls(rdma, server.getPort(), smallCalls, largeEvery);
        } finally {
            server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            boss.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            workers.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    private static Server startServer(boolean rdma, EventLoopGroup boss, EventLoopGroup workers) throws IOException {
        return NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .channelType(rdma ? RdmaServerChannel.class : NioServerSocketChannel.class)
                .bossEventLoopGroup(boss).workerEventLoopGroup(workers)
                .maxInboundMessageSize(RpcClient.MAX_MESSAGE_SIZE)
                .addService(SEGMENTS ? ServerInterceptors.intercept(EchoService.definition(), new StampServer())
                        : EchoService.definition()).build().start();
    }

    /** The server of {@code --two-jvms}: prints its port, serves until its standard input ends. */
    private static void serve(boolean rdma, long spin) throws Exception {
        spinNanos = spin;
        EventLoopGroup boss = group(rdma);
        EventLoopGroup workers = group(rdma);
        Server server = startServer(rdma, boss, workers);
        System.out.println(server.getPort());
        System.out.flush();
        while (System.in.read() >= 0) {
            // until the client's JVM closes the pipe (or exits)
        }
        server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        boss.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        workers.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
    }

    /** A server in a JVM of its own (same classpath), for every round; stopped when its standard input closes. */
    private record ServerProcess(Process process, int port) {
        static ServerProcess start(boolean rdma) throws Exception {
            List<String> command = new ArrayList<>(List.of(
                    Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "--enable-native-access=ALL-UNNAMED", "-Dio.netty.leakDetection.level=disabled"));
            String library = System.getProperty(SoftwareDevice.LIBRARY_PATH);
            if (library != null) {
                command.add("-D" + SoftwareDevice.LIBRARY_PATH + "=" + library);
            }
            // The same system properties as this JVM's command line (RPC_JAVA_OPTS of benchmark.sh).
            for (String arg : java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()) {
                if (arg.startsWith("-D") && !command.contains(arg)) {
                    command.add(arg);
                }
            }
            command.addAll(List.of("-cp", System.getProperty("java.class.path"),
                    RpcThroughputBenchmark.class.getName(), "serve", rdma ? "rdma" : "nio", Long.toString(spinNanos)));
            Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            String port = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))
                    .readLine();
            if (port == null) {
                process.destroyForcibly();
                throw new IllegalStateException("the server JVM exited before it listened: " + process.waitFor());
            }
            return new ServerProcess(process, Integer.parseInt(port.trim()));
        }

        void stop() throws Exception {
            process.getOutputStream().close();
            if (!process.waitFor(15, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor();
            }
        }
    }

    private static Result calls(boolean rdma, int port, int smallCalls, int largeEvery) throws Exception {
        EventLoopGroup client = group(rdma);
        ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1", port)
                .channelType(rdma ? RdmaChannel.class : NioSocketChannel.class)
                .eventLoopGroup(client).usePlaintext().maxInboundMessageSize(RpcClient.MAX_MESSAGE_SIZE).build();
        try {
            Random random = new Random(7);
            long largeBytes = 0;
            long largeNanos = 0;
            long[] small = new long[smallCalls];
            int smallCount = 0;
            int callCount = smallCalls + smallCalls / largeEvery;
            Channel calls = SEGMENTS ? ClientInterceptors.intercept(channel, new StampClient()) : channel;
            long[] toServer = new long[smallCalls];
            long[] toClient = new long[smallCalls];
            for (int i = 0; i < callCount; i++) {
                boolean large = i % (largeEvery + 1) == largeEvery;
                int size = large ? (1 << 20) + random.nextInt(7 << 20) : 1 + random.nextInt(4095);
                Payload request = RpcClient.payload(i, size);
                long start = System.nanoTime();
                Payload response = ClientCalls.blockingUnaryCall(calls, EchoService.ECHO,
                        CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS), request);
                long nanos = System.nanoTime() - start;
                if (response.sequence() != i || !Arrays.equals(response.body(), request.body())) {
                    throw new IllegalStateException("call " + i + " echoed something else");
                }
                if (large) {
                    largeBytes += 2L * size;
                    largeNanos += nanos;
                } else {
                    if (SEGMENTS) {
                        toServer[smallCount] = StampClient.arrived - start;
                        toClient[smallCount] = start + nanos - StampClient.sent;
                    }
                    small[smallCount++] = nanos;
                }
            }
            if (SEGMENTS) {
                Arrays.sort(toServer, 0, smallCount);
                Arrays.sort(toClient, 0, smallCount);
                System.out.printf("  %s segments p50 µs: caller to server executor %.1f, server executor to caller"
                        + " %.1f%n", rdma ? "rdma" : "nio", toServer[smallCount / 2] / 1e3, toClient[smallCount / 2] / 1e3);
            }
            long[] sorted = Arrays.copyOf(small, smallCount);
            Arrays.sort(sorted);
            return new Result(largeBytes / (largeNanos / 1e9) / 1e6, sorted[smallCount / 2] / 1e3,
                    Arrays.stream(sorted).average().orElse(0) / 1e3, sorted[(int) (smallCount * 0.99)] / 1e3);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            client.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** {@code -Drpc.segments=true}: time each small call's two halves (System.nanoTime is one clock per machine). */
    static final boolean SEGMENTS = Boolean.getBoolean("rpc.segments");
    static final Metadata.Key<String> STAMPS = Metadata.Key.of("x-stamps", Metadata.ASCII_STRING_MARSHALLER);

    /** Stamps when the request reached the service (on gRPC's executor) and when its response left it. */
    static final class StampServer implements ServerInterceptor {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                           ServerCallHandler<Q, R> next) {
            long[] t = new long[2];
            ServerCall<Q, R> stamped = new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
                @Override
                public void sendMessage(R message) {
                    t[1] = System.nanoTime();
                    super.sendMessage(message);
                }

                @Override
                public void close(Status status, Metadata trailers) {
                    trailers.put(STAMPS, t[0] + "," + t[1]);
                    super.close(status, trailers);
                }
            };
            return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(next.startCall(stamped,
                    headers)) {
                @Override
                public void onMessage(Q message) {
                    t[0] = System.nanoTime();
                    super.onMessage(message);
                }
            };
        }
    }

    /** Reads the server's stamps of the last call (blocking calls, one at a time). */
    static final class StampClient implements ClientInterceptor {
        static volatile long arrived;
        static volatile long sent;

        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                @Override
                public void start(Listener<R> listener, Metadata headers) {
                    super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                        @Override
                        public void onClose(Status status, Metadata trailers) {
                            String v = trailers.get(STAMPS);
                            if (v != null) {
                                String[] f = v.split(",");
                                arrived = Long.parseLong(f[0]);
                                sent = Long.parseLong(f[1]);
                            }
                            super.onClose(status, trailers);
                        }
                    }, headers);
                }
            };
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
