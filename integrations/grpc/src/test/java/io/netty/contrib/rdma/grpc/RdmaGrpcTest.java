package io.netty.contrib.rdma.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A gRPC server and channel set up by {@link RdmaGrpc} over the software RDMA device: unary calls from 1 B to
 * 4 MiB and a bidi stream, CRC-checked; both ends' channels are RDMA channels whose allocator is
 * {@link RdmaByteBufAllocator#defaultAllocator()} (not gRPC's own).
 */
@Timeout(60)
class RdmaGrpcTest {
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
    private static final MethodDescriptor<byte[], byte[]> ECHO = method("Echo", MethodDescriptor.MethodType.UNARY);
    private static final MethodDescriptor<byte[], byte[]> CHAT =
            method("Chat", MethodDescriptor.MethodType.BIDI_STREAMING);

    private static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName("rdma.test.Echo", name))
                .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    }

    private static ServerServiceDefinition service() {
        return ServerServiceDefinition.builder("rdma.test.Echo")
                .addMethod(ECHO, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(CHAT, ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        out.onNext(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                    }

                    @Override
                    public void onCompleted() {
                        out.onCompleted();
                    }
                }))
                .build();
    }

    private static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    @Test
    void unaryAndBidiCallsOverRdmaWithTheRegisteredAllocator() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        List<Channel> serverChildren = new CopyOnWriteArrayList<>();
        List<Channel> clientChannels = new CopyOnWriteArrayList<>();
        Server server = null;
        ManagedChannel channel = null;
        try {
            server = RdmaGrpc.serverBuilder(new InetSocketAddress("127.0.0.1", 0), group, group)
                    .channelFactory(() -> {
                        RdmaServerChannel ch = new RdmaServerChannel();
                        // First in the pipeline: sees each accepted child before the ServerBootstrap configures it.
                        ch.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                serverChildren.add((Channel) msg);
                                ctx.fireChannelRead(msg);
                            }
                        });
                        return ch;
                    })
                    .maxInboundMessageSize(8 << 20)
                    .addService(service())
                    .build()
                    .start();
            InetSocketAddress address = new InetSocketAddress("127.0.0.1", server.getPort());
            channel = RdmaGrpc.channelBuilder(address, group)
                    .channelFactory(() -> {
                        RdmaChannel ch = new RdmaChannel();
                        clientChannels.add(ch);
                        return ch;
                    })
                    .usePlaintext()
                    .maxInboundMessageSize(8 << 20)
                    .build();
            Random random = new Random(85);
            for (int size : new int[] {1, 1000, 8 << 10, 100_000, 1 << 20, 4 << 20}) {
                byte[] request = new byte[size];
                random.nextBytes(request);
                byte[] reply = ClientCalls.blockingUnaryCall(channel, ECHO,
                        CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS), request);
                assertThat(reply).hasSize(size);
                assertThat(crc(reply)).isEqualTo(crc(request));
            }
            List<byte[]> replies = new CopyOnWriteArrayList<>();
            java.util.concurrent.CompletableFuture<Void> done = new java.util.concurrent.CompletableFuture<>();
            StreamObserver<byte[]> requests = ClientCalls.asyncBidiStreamingCall(
                    channel.newCall(CHAT, CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS)),
                    new StreamObserver<>() {
                        @Override
                        public void onNext(byte[] value) {
                            replies.add(value);
                        }

                        @Override
                        public void onError(Throwable t) {
                            done.completeExceptionally(t);
                        }

                        @Override
                        public void onCompleted() {
                            done.complete(null);
                        }
                    });
            long sent = 0;
            for (int i = 0; i < 50; i++) {
                byte[] message = new byte[i * 10_000];
                random.nextBytes(message);
                sent += crc(message);
                requests.onNext(message);
            }
            requests.onCompleted();
            done.get(20, TimeUnit.SECONDS);
            assertThat(replies).hasSize(50);
            assertThat(replies.stream().mapToLong(RdmaGrpcTest::crc).sum()).isEqualTo(sent);

            assertThat(clientChannels).isNotEmpty();
            assertThat(serverChildren).isNotEmpty().allSatisfy(ch -> assertThat(ch).isInstanceOf(RdmaChannel.class));
            for (Channel ch : List.of(clientChannels.getFirst(), serverChildren.getFirst())) {
                assertThat(ch.config().getAllocator()).as("allocator of %s", ch)
                        .isSameAs(RdmaByteBufAllocator.defaultAllocator());
            }
        } finally {
            if (channel != null) {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            if (server != null) {
                server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** Three unary calls (1 B, 100 kB, 1 MiB) whose replies must equal the requests. */
    private static void echoCalls(ManagedChannel channel) {
        Random random = new Random(86);
        for (int size : new int[] {1, 100_000, 1 << 20}) {
            byte[] request = new byte[size];
            random.nextBytes(request);
            byte[] reply = ClientCalls.blockingUnaryCall(channel, ECHO,
                    CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS), request);
            assertThat(crc(reply)).isEqualTo(crc(request));
        }
    }

    @Test
    void aDualStackServerAnswersAnRdmaClientAndATcpClientOnOnePort() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        List<Channel> serverChildren = new CopyOnWriteArrayList<>();
        Server server = null;
        ManagedChannel rdma = null;
        ManagedChannel tcp = null;
        try {
            server = RdmaGrpc.withTcpListener(RdmaGrpc.serverBuilder(new InetSocketAddress("127.0.0.1", 0), group,
                            group))
                    .channelFactory(() -> {
                        RdmaServerChannel ch = new RdmaServerChannel();
                        ch.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                serverChildren.add((Channel) msg);
                                ctx.fireChannelRead(msg);
                            }
                        });
                        return ch;
                    })
                    .maxInboundMessageSize(8 << 20)
                    .addService(service())
                    .build()
                    .start();
            InetSocketAddress address = new InetSocketAddress("127.0.0.1", server.getPort());
            rdma = RdmaGrpc.channelBuilder(address, group).usePlaintext().maxInboundMessageSize(8 << 20).build();
            echoCalls(rdma);
            // gRPC's own transport (epoll or NIO, its own loops): a client that knows nothing of RDMA.
            tcp = NettyChannelBuilder.forAddress(address).usePlaintext().maxInboundMessageSize(8 << 20).build();
            echoCalls(tcp);
            assertThat(serverChildren).hasSize(2).allSatisfy(ch -> assertThat(ch).isInstanceOf(RdmaChannel.class));
            assertThat(serverChildren).extracting(ch -> ((RdmaChannel) ch).isTcp()).containsExactly(false, true);
        } finally {
            for (ManagedChannel c : new ManagedChannel[] {rdma, tcp}) {
                if (c != null) {
                    c.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
                }
            }
            if (server != null) {
                server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void aClientWithFallbackReachesAPlainTcpServer() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        List<RdmaChannel> clientChannels = new CopyOnWriteArrayList<>();
        Server server = null;
        ManagedChannel channel = null;
        try {
            server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                    .maxInboundMessageSize(8 << 20).addService(service()).build().start();
            InetSocketAddress address = new InetSocketAddress("127.0.0.1", server.getPort());
            channel = RdmaGrpc.withTcpFallback(RdmaGrpc.channelBuilder(address, group))
                    .channelFactory(() -> {
                        RdmaChannel ch = new RdmaChannel();
                        clientChannels.add(ch);
                        return ch;
                    })
                    .usePlaintext().maxInboundMessageSize(8 << 20).build();
            echoCalls(channel);
            assertThat(clientChannels).isNotEmpty();
            RdmaChannel used = clientChannels.getLast();
            assertThat(used.isTcp()).isTrue();
            assertThat(used.fallbackReason()).isNotNull();
        } finally {
            if (channel != null) {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            if (server != null) {
                server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
