package io.netty.contrib.channel.rdma.internal.protocol;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U16;
import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U32;

/**
 * Flyweight over the 8-byte header that starts every SEND. Big-endian. See docs/PROTOCOL.md.
 *
 * <pre>
 *  0  type         u8   DATA, CREDIT or SHUTDOWN
 *  1  flags        u8   reserved, 0
 *  2  recvCredits  u16  receive buffers the sender re-posted since its last report
 *  4  ringCredits  u32  bytes of its receive ring the sender released since its last report
 *  8  payload (DATA only)
 * </pre>
 */
public final class MessageHeader {
    /** Payload bytes follow the header. */
    public static final byte TYPE_DATA = 1;
    /** Only the credits: nothing follows. */
    public static final byte TYPE_CREDIT = 2;
    /** The sender will write nothing more (half-close); nothing follows. */
    public static final byte TYPE_SHUTDOWN = 3;

    public static final int TYPE_OFFSET = 0;
    public static final int FLAGS_OFFSET = 1;
    public static final int RECV_CREDITS_OFFSET = 2;
    public static final int RING_CREDITS_OFFSET = 4;
    public static final int LENGTH = 8;

    /** Largest number of receive credits one header can return. */
    public static final int MAX_RECV_CREDITS = 0xFFFF;

    private MemorySegment segment;
    private long offset;

    public MessageHeader wrap(MemorySegment segment, long offset) {
        this.segment = segment;
        this.offset = offset;
        return this;
    }

    public MessageHeader write(byte type, int recvCredits, int ringCredits) {
        if (recvCredits < 0 || recvCredits > MAX_RECV_CREDITS) {
            throw new IllegalArgumentException("recvCredits: " + recvCredits + " (expected: 0-" + MAX_RECV_CREDITS + ')');
        }
        if (ringCredits < 0) {
            throw new IllegalArgumentException("ringCredits: " + ringCredits + " (expected: >= 0)");
        }
        segment.set(JAVA_BYTE, offset + TYPE_OFFSET, type);
        segment.set(JAVA_BYTE, offset + FLAGS_OFFSET, (byte) 0);
        segment.set(U16, offset + RECV_CREDITS_OFFSET, (short) recvCredits);
        segment.set(U32, offset + RING_CREDITS_OFFSET, ringCredits);
        return this;
    }

    /**
     * Checks a received message of {@code length} bytes (header included).
     *
     * @throws ProtocolException when the peer sent something this version does not know
     */
    public MessageHeader validate(int length) {
        if (length < LENGTH) {
            throw new ProtocolException("message of " + length + " bytes is shorter than its " + LENGTH + "-byte header");
        }
        byte type = type();
        if (type != TYPE_DATA && type != TYPE_CREDIT && type != TYPE_SHUTDOWN) {
            throw new ProtocolException("unknown message type " + type);
        }
        if (type != TYPE_DATA && length != LENGTH) {
            throw new ProtocolException("message of type " + typeName(type) + " carries " + (length - LENGTH)
                    + " payload bytes");
        }
        if (flags() != 0) {
            throw new ProtocolException("message header has unknown flags " + flags());
        }
        if (ringCredits() < 0) {
            throw new ProtocolException("message header returns a negative ring credit " + ringCredits());
        }
        return this;
    }

    public byte type() {
        return segment.get(JAVA_BYTE, offset + TYPE_OFFSET);
    }

    public int flags() {
        return Byte.toUnsignedInt(segment.get(JAVA_BYTE, offset + FLAGS_OFFSET));
    }

    public int recvCredits() {
        return Short.toUnsignedInt(segment.get(U16, offset + RECV_CREDITS_OFFSET));
    }

    public int ringCredits() {
        return segment.get(U32, offset + RING_CREDITS_OFFSET);
    }

    public static String typeName(byte type) {
        return switch (type) {
            case TYPE_DATA -> "DATA";
            case TYPE_CREDIT -> "CREDIT";
            case TYPE_SHUTDOWN -> "SHUTDOWN";
            default -> "UNKNOWN(" + type + ')';
        };
    }

    @Override
    public String toString() {
        return "MessageHeader{type=" + typeName(type()) + ", flags=" + flags() + ", recvCredits=" + recvCredits()
                + ", ringCredits=" + ringCredits() + '}';
    }
}
