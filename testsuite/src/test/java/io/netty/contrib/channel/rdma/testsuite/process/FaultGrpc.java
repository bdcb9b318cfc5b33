package io.netty.contrib.channel.rdma.testsuite.process;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.contrib.rdma.grpc.RdmaGrpc;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * The gRPC half of the fault matrix: a unary echo service over RDMA in {@link FaultServerProcess}, and in
 * {@link FaultClientProcess} a caller that makes calls back to back while the echo streams run, each request of a
 * random size (mostly up to 4 KiB, one in eight up to 64 KiB) whose every byte is a function of the call and the
 * position, checked in the response. A call has {@link #CALL_SECONDS}; a failed one is counted by its status and the
 * next one goes on (gRPC reconnects by itself). The service is described by hand (no protoc), with a byte-array marshaller.
 */
final class FaultGrpc {
    static final String SERVICE = "fault.Echo";
    static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw Status.INTERNAL.withCause(e).asRuntimeException();
            }
        }
    };
    static final MethodDescriptor<byte[], byte[]> ECHO = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Echo"))
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    private static final int MAX_MESSAGE = 64 << 10;
    /**
     * What a call may take: longer than the echo streams' queue on the emulated wire (4 MiB in flight at about
     * 0.5 MB/s, 8 s, which every call waits behind), so that a call fails only when the transport fails it.
     */
    static final int CALL_SECONDS = 30;

    private FaultGrpc() {
    }

    /** The echo server on {@code address}, its connections on {@code group}, started. */
    static Server server(InetSocketAddress address, EventLoopGroup group, int ackTimeout) throws IOException {
        NettyServerBuilder b = RdmaGrpc.serverBuilder(address, group, group)
                .withChildOption(RdmaChannelOption.ACK_TIMEOUT, ackTimeout)
                .maxInboundMessageSize(2 * MAX_MESSAGE)
                .addService(ServerServiceDefinition.builder(SERVICE)
                        .addMethod(ECHO, ServerCalls.asyncUnaryCall((request, responses) -> {
                            responses.onNext(request);
                            responses.onCompleted();
                        })).build());
        Integer ringSize = Integer.getInteger(FaultClientProcess.RING_SIZE_PROPERTY);
        if (ringSize != null) {
            b.withChildOption(RdmaChannelOption.RING_SIZE, ringSize);
        }
        return b.build().start();
    }

    /** A channel to the echo server at {@code address} over RDMA on {@code group}. */
    static ManagedChannel channel(InetSocketAddress address, EventLoopGroup group, int ackTimeout, int retryCount) {
        NettyChannelBuilder b = RdmaGrpc.channelBuilder(address, group).usePlaintext()
                .maxInboundMessageSize(2 * MAX_MESSAGE)
                .withOption(RdmaChannelOption.ACK_TIMEOUT, ackTimeout)
                .withOption(RdmaChannelOption.RETRY_COUNT, retryCount);
        Integer ringSize = Integer.getInteger(FaultClientProcess.RING_SIZE_PROPERTY);
        if (ringSize != null) {
            b.withOption(RdmaChannelOption.RING_SIZE, ringSize);
        }
        return b.build();
    }

    /** Calls back to back on one channel until {@link #stop()}; its totals in {@link #toString()}. */
    static final class Caller implements Runnable {
        private final ManagedChannel channel;
        private final Random random = new Random(29);
        private volatile boolean stop;
        private long calls;
        private long ok;
        private long failed;
        private long verified;
        private long mismatches;
        private final Map<String, Integer> failures = new TreeMap<>();
        private String lastFailure = "none";

        Caller(ManagedChannel channel) {
            this.channel = channel;
        }

        void stop() {
            stop = true;
        }

        @Override
        public void run() {
            while (!stop) {
                int size = random.nextInt(8) == 0 ? 1 + random.nextInt(MAX_MESSAGE) : 1 + random.nextInt(4096);
                String failure = call(channel, calls++, size, CALL_SECONDS);
                synchronized (this) {
                    if (failure == null) {
                        ok++;
                        verified += size;
                    } else if (failure.startsWith("MISMATCH")) {
                        mismatches++;
                        lastFailure = failure;
                    } else {
                        failed++;
                        failures.merge(failure.split(":", 2)[0], 1, Integer::sum);
                        lastFailure = failure;
                    }
                }
            }
        }

        @Override
        public synchronized String toString() {
            return "calls=" + calls + " ok=" + ok + " failed=" + failed + " verifiedBytes=" + verified
                    + " mismatches=" + mismatches + " failures=" + (failures.isEmpty() ? "none"
                    : failures.toString().replace(" ", "")) + " last=" + lastFailure;
        }
    }

    /**
     * One call of {@code size} bytes, number {@code n}, within {@code seconds}: {@code null} when the response is the
     * request, {@code MISMATCH ...} when it is not, else the status code and its description.
     */
    static String call(ManagedChannel channel, long n, int size, int seconds) {
        byte[] request = new byte[size];
        for (int i = 0; i < size; i++) {
            request[i] = (byte) (n * 131 + i * 7 + (i >>> 8));
        }
        try {
            byte[] response = ClientCalls.blockingUnaryCall(channel, ECHO,
                    CallOptions.DEFAULT.withDeadlineAfter(seconds, TimeUnit.SECONDS), request);
            if (response.length != size) {
                return "MISMATCH call " + n + ": " + response.length + " bytes back of " + size;
            }
            for (int i = 0; i < size; i++) {
                if (response[i] != request[i]) {
                    return "MISMATCH call " + n + " at byte " + i;
                }
            }
            return null;
        } catch (StatusRuntimeException e) {
            Status s = e.getStatus();
            return s.getCode() + ": " + (s.getDescription() == null ? "" : s.getDescription().replace('\n', ' '))
                    + (s.getCause() == null ? "" : " <- " + FaultClientProcess.describe(s.getCause()));
        }
    }
}
