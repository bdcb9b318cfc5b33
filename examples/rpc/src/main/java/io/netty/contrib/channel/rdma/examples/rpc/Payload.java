package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.MethodDescriptor.Marshaller;
import io.grpc.Status;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * The sample's one message: what a {@code .proto} file would declare as
 * {@code message Payload { int32 sequence = 1; bytes body = 2; }}, with the {@link Marshaller} that protobuf's
 * generated code would otherwise provide. On the wire: the sequence (4 bytes, big-endian), then the body.
 */
record Payload(int sequence, byte[] body) {
    static final Marshaller<Payload> MARSHALLER = new Marshaller<>() {
        @Override
        public InputStream stream(Payload payload) {
            byte[] bytes = new byte[Integer.BYTES + payload.body.length];
            ByteBuffer.wrap(bytes).putInt(payload.sequence).put(payload.body);
            return new ByteArrayInputStream(bytes);
        }

        @Override
        public Payload parse(InputStream stream) {
            try {
                byte[] bytes = stream.readAllBytes();
                if (bytes.length < Integer.BYTES) {
                    throw Status.INTERNAL.withDescription("payload of " + bytes.length + " bytes: too short")
                            .asRuntimeException();
                }
                ByteBuffer buf = ByteBuffer.wrap(bytes);
                int sequence = buf.getInt();
                byte[] body = new byte[buf.remaining()];
                buf.get(body);
                return new Payload(sequence, body);
            } catch (IOException e) {
                throw Status.INTERNAL.withDescription("unreadable payload").withCause(e).asRuntimeException();
            }
        }
    };
}
