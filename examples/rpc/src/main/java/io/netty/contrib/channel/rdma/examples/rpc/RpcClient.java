package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.rdma.grpc.RdmaGrpc;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Iterator;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Calls an {@link RpcServer} over RDMA: unary calls one at a time (round-trip percentiles), one server-streaming
 * call and one bidirectional stream, every response compared with what was sent. Exits 0 only when all matched.
 * The channel is an ordinary {@link NettyChannelBuilder} with the RDMA channel type and an RDMA event loop group.
 *
 * <p>gRPC connects when the first call is made; {@code --connect-timeout} bounds that connection's whole set-up
 * ({@code ChannelOption.CONNECT_TIMEOUT_MILLIS}, given to gRPC with {@code withOption}), within each call's own 60 s
 * deadline. Over RDMA the set-up's first step, rdma_cm's address resolution, keeps its own timeout
 * ({@code RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS}, 2 s).
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp ... RpcClient [--address 127.0.0.1] [--port 7575] [--count 1000]
 *      [--sizes 64,16384,262144] [--connect-timeout 30]
 * </pre>
 */
public final class RpcClient {
    /** Requests in flight on the bidirectional stream before the client waits for a response. */
    static final int CHAT_WINDOW = 16;
    /** Largest message either side accepts (gRPC's default is 4 MiB). */
    static final int MAX_MESSAGE_SIZE = 32 << 20;

    private RpcClient() {
    }

    public static void main(String[] args) throws Exception {
        Options o = Options.parse(args);
        SoftwareDevice.selectIfNoHardware();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        ManagedChannel channel = newChannel(o.address, o.port, group, o.connectTimeoutSeconds);
        boolean ok = false;
        try {
            String sizes = Arrays.toString(o.sizes);
            long[] rtts = unary(channel, o.count, o.sizes);
            Arrays.sort(rtts);
            System.out.printf("Echo (unary): %d calls of %s B, all verified; round trip p50 %.1f us, p99 %.1f us,"
                    + " max %.1f us%n", o.count, sizes, percentile(rtts, 50) / 1e3, percentile(rtts, 99) / 1e3,
                    rtts[rtts.length - 1] / 1e3);
            for (int size : o.sizes) {
                long t = System.nanoTime();
                repeat(channel, o.count, size);
                report("Repeat (server streaming)", o.count, size, System.nanoTime() - t);
            }
            long t = System.nanoTime();
            chat(channel, o.count, o.sizes);
            report("Chat (bidi streaming, " + CHAT_WINDOW + " in flight)", o.count, sizes, System.nanoTime() - t);
            ok = true;
        } catch (RuntimeException e) {
            System.err.println("RPC failed: " + e);
        } finally {
            channel.shutdown();
            if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        System.exit(ok ? 0 : 1);
    }

    /** A gRPC channel to {@code address:port} over RDMA. Shutting down {@code group} is up to the caller. */
    static ManagedChannel newChannel(String address, int port, EventLoopGroup group) {
        return newChannel(address, port, group, Options.DEFAULT_CONNECT_TIMEOUT_SECONDS);
    }

    /** The same, with a connect timeout of its own. */
    static ManagedChannel newChannel(String address, int port, EventLoopGroup group, int connectTimeoutSeconds) {
        return RdmaGrpc.configure(NettyChannelBuilder.forAddress(address, port), group)
                .withOption(ChannelOption.CONNECT_TIMEOUT_MILLIS, connectTimeoutSeconds * 1000)
                .usePlaintext()
                .maxInboundMessageSize(MAX_MESSAGE_SIZE)
                .build();
    }

    /** {@code count} Echo calls one after the other, sizes taken in turn; returns each call's round trip. */
    static long[] unary(Channel channel, int count, int[] sizes) {
        long[] rtts = new long[count];
        for (int i = 0; i < count; i++) {
            Payload request = payload(i, sizes[i % sizes.length]);
            long start = System.nanoTime();
            Payload response = ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, deadline(), request);
            rtts[i] = System.nanoTime() - start;
            check(response, request, "Echo call " + i);
        }
        return rtts;
    }

    /** One Repeat call asking for {@code count} responses of {@code size} bytes. */
    static void repeat(Channel channel, int count, int size) {
        Payload request = payload(count, size);
        Iterator<Payload> responses = ClientCalls.blockingServerStreamingCall(channel, EchoService.REPEAT,
                deadline(), request);
        int received = 0;
        while (responses.hasNext()) {
            check(responses.next(), new Payload(received, request.body()), "Repeat response " + received);
            received++;
        }
        if (received != count) {
            throw new IllegalStateException("Repeat: " + received + " responses, expected " + count);
        }
    }

    /**
     * One Chat stream of {@code count} requests, sizes taken in turn, at most {@link #CHAT_WINDOW} unanswered at
     * a time (so neither side buffers without bound); every response must be the request it answers.
     */
    static void chat(Channel channel, int count, int[] sizes) throws Exception {
        Chat chat = new Chat(count, sizes);
        chat.start(channel);
        try {
            chat.done.get(120, TimeUnit.SECONDS);
        } catch (Exception e) {
            chat.cancel(e);
            throw e;
        }
    }

    /** The client side of a Chat stream; gRPC calls the response methods one at a time. */
    private static final class Chat implements StreamObserver<Payload> {
        final CompletableFuture<Void> done = new CompletableFuture<>();
        private final int count;
        private final int[] sizes;
        private final Queue<Payload> unanswered = new ArrayDeque<>();
        private StreamObserver<Payload> requests;
        private int sent;
        private int received;

        Chat(int count, int[] sizes) {
            this.count = count;
            this.sizes = sizes;
        }

        synchronized void start(Channel channel) {
            requests = ClientCalls.asyncBidiStreamingCall(channel.newCall(EchoService.CHAT, deadline()), this);
            while (sent < Math.min(count, CHAT_WINDOW)) {
                sendNext();
            }
        }

        // Requests go out from the starting thread and from response callbacks: a StreamObserver is not
        // thread-safe, hence the lock.
        private void sendNext() {
            if (sent < count) {
                int i = sent++;
                Payload request = payload(i, sizes[i % sizes.length]);
                unanswered.add(request);
                requests.onNext(request);
                if (sent == count) {
                    requests.onCompleted();
                }
            }
        }

        synchronized void cancel(Throwable cause) {
            requests.onError(cause);
        }

        @Override
        public synchronized void onNext(Payload response) {
            Payload expected = unanswered.poll();
            if (expected == null) {
                done.completeExceptionally(new IllegalStateException("Chat: a response nobody asked for"));
                return;
            }
            try {
                check(response, expected, "Chat response " + received);
            } catch (IllegalStateException e) {
                done.completeExceptionally(e);
                requests.onError(e);
                return;
            }
            received++;
            sendNext();
        }

        @Override
        public void onError(Throwable t) {
            done.completeExceptionally(t);
        }

        @Override
        public synchronized void onCompleted() {
            if (received == count) {
                done.complete(null);
            } else {
                done.completeExceptionally(new IllegalStateException("Chat: " + received + " responses, expected "
                        + count));
            }
        }
    }

    private static CallOptions deadline() {
        return CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS);
    }

    /** The payload of request {@code i}: a body of {@code size} bytes that depends on {@code i}. */
    static Payload payload(int sequence, int size) {
        byte[] body = new byte[size];
        new Random(sequence * 31L + size).nextBytes(body);
        return new Payload(sequence, body);
    }

    private static void check(Payload actual, Payload expected, String what) {
        if (actual.sequence() != expected.sequence() || !Arrays.equals(actual.body(), expected.body())) {
            throw new IllegalStateException(what + " differs from what was expected (sequence "
                    + actual.sequence() + ", " + actual.body().length + " B; expected sequence "
                    + expected.sequence() + ", " + expected.body().length + " B)");
        }
    }

    private static void report(String what, int count, Object size, long nanos) {
        double seconds = nanos / 1e9;
        System.out.printf("%s: %d messages of %s B, all verified; %.0f messages/s%n", what, count, size,
                count / seconds);
    }

    private static long percentile(long[] sorted, double p) {
        int index = (int) Math.ceil(p / 100 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
    }
}
