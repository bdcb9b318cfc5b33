package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.MethodDescriptor;
import io.grpc.MethodDescriptor.MethodType;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;

/**
 * A gRPC service with one call of each common kind. As a {@code .proto} file it would read:
 *
 * <pre>
 * service Echo {
 *   rpc Echo(Payload) returns (Payload);                // unary: the request back
 *   rpc Repeat(Payload) returns (stream Payload);       // server streaming: `sequence` copies of the body,
 *                                                        //   numbered 0, 1, ...
 *   rpc Chat(stream Payload) returns (stream Payload);  // bidi streaming: every request back as it arrives
 * }
 * </pre>
 *
 * The method descriptors below are what {@code protoc-gen-grpc-java} would generate; they are written by hand
 * because that code generator's linux-x86_64 binary is not in Maven Central for the gRPC versions this build
 * uses. With generated code, nothing changes in how the server and the channel are built over RDMA.
 */
final class EchoService {
    static final String NAME = "rdma.example.Echo";

    static final MethodDescriptor<Payload, Payload> ECHO = method("Echo", MethodType.UNARY);
    static final MethodDescriptor<Payload, Payload> REPEAT = method("Repeat", MethodType.SERVER_STREAMING);
    static final MethodDescriptor<Payload, Payload> CHAT = method("Chat", MethodType.BIDI_STREAMING);

    private EchoService() {
    }

    private static MethodDescriptor<Payload, Payload> method(String name, MethodType type) {
        return MethodDescriptor.<Payload, Payload>newBuilder()
                .setType(type)
                .setFullMethodName(MethodDescriptor.generateFullMethodName(NAME, name))
                .setRequestMarshaller(Payload.MARSHALLER)
                .setResponseMarshaller(Payload.MARSHALLER)
                .build();
    }

    /** The server side: what a generated {@code EchoImplBase.bindService()} would return. */
    static ServerServiceDefinition definition() {
        return ServerServiceDefinition.builder(NAME)
                .addMethod(ECHO, ServerCalls.asyncUnaryCall(EchoService::echo))
                .addMethod(REPEAT, ServerCalls.asyncServerStreamingCall(EchoService::repeat))
                .addMethod(CHAT, ServerCalls.asyncBidiStreamingCall(EchoService::chat))
                .build();
    }

    private static void echo(Payload request, StreamObserver<Payload> responses) {
        responses.onNext(request);
        responses.onCompleted();
    }

    private static void repeat(Payload request, StreamObserver<Payload> responses) {
        new Repeater(request, (ServerCallStreamObserver<Payload>) responses).start();
    }

    /**
     * Sends only while the call is ready (gRPC's flow control), so a long stream of large messages never piles
     * up in memory: the transport's backpressure reaches this code as {@code isReady()} turning false.
     */
    private static final class Repeater implements Runnable {
        private final Payload request;
        private final ServerCallStreamObserver<Payload> responses;
        private int sent;
        private boolean done;

        Repeater(Payload request, ServerCallStreamObserver<Payload> responses) {
            this.request = request;
            this.responses = responses;
        }

        void start() {
            responses.setOnCancelHandler(() -> done = true);
            responses.setOnReadyHandler(this);
        }

        @Override
        public void run() {
            while (!done && sent < request.sequence() && responses.isReady()) {
                responses.onNext(new Payload(sent++, request.body()));
            }
            if (!done && sent == request.sequence()) {
                done = true;
                responses.onCompleted();
            }
        }
    }

    private static StreamObserver<Payload> chat(StreamObserver<Payload> responses) {
        return new StreamObserver<>() {
            @Override
            public void onNext(Payload request) {
                responses.onNext(request);
            }

            @Override
            public void onError(Throwable t) {
                // the client cancelled or the connection broke: nothing left to answer
            }

            @Override
            public void onCompleted() {
                responses.onCompleted();
            }
        };
    }
}
