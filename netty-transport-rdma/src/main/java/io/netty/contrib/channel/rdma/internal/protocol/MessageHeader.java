package io.netty.contrib.channel.rdma.internal.protocol;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U16;
import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U32;
import static io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters.U64;

/**
 * Flyweight over the 8-byte header that starts every SEND. Big-endian. See docs/PROTOCOL.md.
 *
 * <pre>
 *  0  type         u8   DATA, CREDIT, SHUTDOWN or RING
 *  1  flags        u8   WANTS_RING, RING_SEEN; other bits 0
 *  2  recvCredits  u16  receive credits the sender granted since its last report
 *  4  ringCredits  u32  bytes of its receive ring the sender released since its last report
 *  8  payload (DATA), or for RING:
 *  8  ringAddress  u64  the sender's new receive ring (0 with size 0: no ring any more)
 * 16  ringRkey     u32
 * 20  ringSize     u32
 * </pre>
 */
public final class MessageHeader {
    /** Payload bytes follow the header. */
    public static final byte TYPE_DATA = 1;
    /** Only the credits: nothing follows. */
    public static final byte TYPE_CREDIT = 2;
    /** The sender will write nothing more (half-close); nothing follows. */
    public static final byte TYPE_SHUTDOWN = 3;
    /**
     * The sender has a new receive ring, or none (size 0): writes after this one go there (with the immediate's
     * generation flipped), and ring credits in later headers are for it. Ring credits of this header itself are 0.
     */
    public static final byte TYPE_RING = 4;

    /**
     * On DATA: the sender has a write larger than a receive slot waiting and the receiver offers no ring; the
     * receiver may answer with a RING message.
     */
    public static final int FLAG_WANTS_RING = 1;
    /**
     * The sender has taken the last RING message it received: nothing it posts from now on goes to the ring that
     * message replaced, so the receiver may free it.
     */
    public static final int FLAG_RING_SEEN = 2;
    private static final int KNOWN_FLAGS = FLAG_WANTS_RING | FLAG_RING_SEEN;

    public static final int TYPE_OFFSET = 0;
    public static final int FLAGS_OFFSET = 1;
    public static final int RECV_CREDITS_OFFSET = 2;
    public static final int RING_CREDITS_OFFSET = 4;
    public static final int LENGTH = 8;
    public static final int RING_ADDRESS_OFFSET = 8;
    public static final int RING_RKEY_OFFSET = 16;
    public static final int RING_SIZE_OFFSET = 20;
    /** Bytes after the header of a RING message. */
    public static final int RING_PAYLOAD = 16;

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
        return write(type, 0, recvCredits, ringCredits);
    }

    public MessageHeader write(byte type, int flags, int recvCredits, int ringCredits) {
        if (recvCredits < 0 || recvCredits > MAX_RECV_CREDITS) {
            throw new IllegalArgumentException("recvCredits: " + recvCredits + " (expected: 0-" + MAX_RECV_CREDITS + ')');
        }
        if (ringCredits < 0) {
            throw new IllegalArgumentException("ringCredits: " + ringCredits + " (expected: >= 0)");
        }
        segment.set(JAVA_BYTE, offset + TYPE_OFFSET, type);
        segment.set(JAVA_BYTE, offset + FLAGS_OFFSET, (byte) flags);
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
        if (type != TYPE_DATA && type != TYPE_CREDIT && type != TYPE_SHUTDOWN && type != TYPE_RING) {
            throw new ProtocolException("unknown message type " + type);
        }
        if (type == TYPE_RING) {
            if (length != LENGTH + RING_PAYLOAD) {
                throw new ProtocolException("RING message of " + length + " bytes (expected: "
                        + (LENGTH + RING_PAYLOAD) + ')');
            }
            if (ringCredits() != 0) {
                throw new ProtocolException("RING message returns ring credits");
            }
            long size = ringSize();
            String invalid = ConnectParameters.invalidRing(ringAddress(), ringRkey(), size);
            if (invalid != null) {
                throw new ProtocolException("RING message announces a ring of " + size + " bytes at 0x"
                        + Long.toHexString(ringAddress()) + ": " + invalid + " (expected: 0 with address and rkey"
                        + " 0, or " + ConnectParameters.MIN_RING_SIZE + "-" + ConnectParameters.MAX_RING_SIZE
                        + " bytes, a multiple of " + Immediate.ALIGNMENT + ", at a non-zero address)");
            }
        } else if (type != TYPE_DATA && length != LENGTH) {
            throw new ProtocolException("message of type " + typeName(type) + " carries " + (length - LENGTH)
                    + " payload bytes");
        }
        if ((flags() & ~KNOWN_FLAGS) != 0 || (flags() & FLAG_WANTS_RING) != 0 && type != TYPE_DATA) {
            throw new ProtocolException("message header of type " + typeName(type) + " has unknown flags "
                    + flags());
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

    /** Writes the payload of a RING message after this header. */
    public MessageHeader writeRing(long address, int rkey, int size) {
        segment.set(U64, offset + RING_ADDRESS_OFFSET, address);
        segment.set(U32, offset + RING_RKEY_OFFSET, rkey);
        segment.set(U32, offset + RING_SIZE_OFFSET, size);
        return this;
    }

    public long ringAddress() {
        return segment.get(U64, offset + RING_ADDRESS_OFFSET);
    }

    public int ringRkey() {
        return segment.get(U32, offset + RING_RKEY_OFFSET);
    }

    /** Size of the announced ring in bytes, unsigned. */
    public long ringSize() {
        return Integer.toUnsignedLong(segment.get(U32, offset + RING_SIZE_OFFSET));
    }

    public static String typeName(byte type) {
        return switch (type) {
            case TYPE_DATA -> "DATA";
            case TYPE_CREDIT -> "CREDIT";
            case TYPE_SHUTDOWN -> "SHUTDOWN";
            case TYPE_RING -> "RING";
            default -> "UNKNOWN(" + type + ')';
        };
    }

    @Override
    public String toString() {
        return "MessageHeader{type=" + typeName(type()) + ", flags=" + flags() + ", recvCredits=" + recvCredits()
                + ", ringCredits=" + ringCredits() + '}';
    }
}
