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
 *  0  type         u8   DATA, CREDIT, SHUTDOWN, RING or SEAL
 *  1  flags        u8   WANTS_RING, RING_SEEN; other bits 0
 *  2  recvCredits  u16  receive credits the sender granted since its last report
 *  4  returnedSlabs u32 slabs of its receive ring the sender returned since its last report, bit k for slab k
 *  8  payload (DATA); for SEAL (flags, recvCredits and returnedSlabs 0):
 *  8  immediate    u32  the ring write it seals, as an RDMA WRITE WITH IMMEDIATE would carry it (SEAL set)
 *     or for RING:
 *  8  ringAddress  u64  the sender's new receive ring (0 with size 0: no ring any more)
 * 16  ringSize     u32  bytes, slabs × slab size
 * 20  slabs        u16  how many slabs the ring is cut into, 1 .. 32 (0: no ring)
 * 22  ringFlags    u16  bit 0 FIXED_RKEYS: a returned slab keeps its rkey (memory regions, no windows); others 0
 * 24  rkeys        u32 × slabs: the rkey of each slab's memory window, slab k at 24 + 4k
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
     * generation flipped), and slabs returned in later headers are its slabs. This header itself returns none.
     */
    public static final byte TYPE_RING = 4;
    /**
     * Sent with {@code SEND_WITH_INV} right after a plain RDMA WRITE into the receiver's ring: the write's immediate
     * follows the header, and the send's invalidate rkey is the window of the write's slab, which the receiver's
     * device invalidated as the message arrived; the writer left that slab (docs/PROTOCOL.md §3).
     */
    public static final byte TYPE_SEAL = 5;

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
    public static final int RETURNED_SLABS_OFFSET = 4;
    public static final int LENGTH = 8;
    public static final int SEAL_IMMEDIATE_OFFSET = 8;
    /** Bytes after the header of a SEAL message: the immediate. */
    public static final int SEAL_PAYLOAD = 4;
    public static final int RING_ADDRESS_OFFSET = 8;
    public static final int RING_SIZE_OFFSET = 16;
    public static final int RING_SLABS_OFFSET = 20;
    public static final int RING_FLAGS_OFFSET = 22;
    /** RING flag: the slabs have no windows of their own, a returned slab keeps its rkey. */
    public static final int RING_FIXED_RKEYS = 1;
    public static final int RING_RKEYS_OFFSET = 24;
    /** Bytes after the header of a RING message before its rkeys. */
    public static final int RING_FIXED_PAYLOAD = 16;
    /** Bytes after the header of the largest RING message. */
    public static final int RING_PAYLOAD = RING_FIXED_PAYLOAD + 4 * Immediate.MAX_SLABS;
    /** The largest slab: a write's length must fit the immediate. */
    public static final int MAX_SLAB_SIZE = 1 << 24;

    /** Largest number of receive credits one header can return. */
    public static final int MAX_RECV_CREDITS = 0xFFFF;

    private MemorySegment segment;
    private long offset;

    public MessageHeader wrap(MemorySegment segment, long offset) {
        this.segment = segment;
        this.offset = offset;
        return this;
    }

    public MessageHeader write(byte type, int recvCredits, int returnedSlabs) {
        return write(type, 0, recvCredits, returnedSlabs);
    }

    /** @param returnedSlabs slabs returned, bit k for slab k */
    public MessageHeader write(byte type, int flags, int recvCredits, int returnedSlabs) {
        if (recvCredits < 0 || recvCredits > MAX_RECV_CREDITS) {
            throw new IllegalArgumentException("recvCredits: " + recvCredits + " (expected: 0-" + MAX_RECV_CREDITS + ')');
        }
        segment.set(JAVA_BYTE, offset + TYPE_OFFSET, type);
        segment.set(JAVA_BYTE, offset + FLAGS_OFFSET, (byte) flags);
        segment.set(U16, offset + RECV_CREDITS_OFFSET, (short) recvCredits);
        segment.set(U32, offset + RETURNED_SLABS_OFFSET, returnedSlabs);
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
        if (type != TYPE_DATA && type != TYPE_CREDIT && type != TYPE_SHUTDOWN && type != TYPE_RING
                && type != TYPE_SEAL) {
            throw new ProtocolException("unknown message type " + type);
        }
        if (type == TYPE_SEAL) {
            if (length != LENGTH + SEAL_PAYLOAD) {
                throw new ProtocolException("SEAL message of " + length + " bytes (expected: " + (LENGTH + SEAL_PAYLOAD)
                        + ')');
            }
            if (flags() != 0 || recvCredits() != 0 || returnedSlabs() != 0) {
                throw new ProtocolException("SEAL message with flags, credits or slabs (expected: none)");
            }
            if (!Immediate.seal(sealImmediate())) {
                throw new ProtocolException("SEAL message for " + Immediate.toString(sealImmediate())
                        + ", which does not seal its slab");
            }
            return this;
        }
        if (type == TYPE_RING) {
            if (length < LENGTH + RING_FIXED_PAYLOAD) {
                throw new ProtocolException("RING message of " + length + " bytes (expected: at least "
                        + (LENGTH + RING_FIXED_PAYLOAD) + ')');
            }
            int slabs = ringSlabs();
            if (length != LENGTH + RING_FIXED_PAYLOAD + 4 * slabs) {
                throw new ProtocolException("RING message of " + length + " bytes for " + slabs + " slabs (expected: "
                        + (LENGTH + RING_FIXED_PAYLOAD + 4 * slabs) + ')');
            }
            if (returnedSlabs() != 0) {
                throw new ProtocolException("RING message returns slabs");
            }
            String invalid = invalidRing(ringAddress(), ringSize(), slabs, ringFlags());
            if (invalid != null) {
                throw new ProtocolException("RING message announces a ring of " + ringSize() + " bytes in " + slabs
                        + " slabs at 0x" + Long.toHexString(ringAddress()) + ": " + invalid + " (expected: all 0, or "
                        + ConnectParameters.MIN_RING_SIZE + "-" + ConnectParameters.MAX_RING_SIZE + " bytes in 1-"
                        + Immediate.MAX_SLABS + " slabs of a multiple of " + Immediate.ALIGNMENT + " bytes up to "
                        + MAX_SLAB_SIZE + ", at a non-zero address)");
            }
        } else if (type != TYPE_DATA && length != LENGTH) {
            throw new ProtocolException("message of type " + typeName(type) + " carries " + (length - LENGTH)
                    + " payload bytes");
        }
        if ((flags() & ~KNOWN_FLAGS) != 0 || (flags() & FLAG_WANTS_RING) != 0 && type != TYPE_DATA) {
            throw new ProtocolException("message header of type " + typeName(type) + " has unknown flags "
                    + flags());
        }
        return this;
    }

    /** Writes the immediate of a SEAL message after this header. */
    public MessageHeader writeSeal(int immediate) {
        segment.set(U32, offset + SEAL_IMMEDIATE_OFFSET, immediate);
        return this;
    }

    /** The immediate a SEAL message carries. */
    public int sealImmediate() {
        return segment.get(U32, offset + SEAL_IMMEDIATE_OFFSET);
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

    /** Slabs of the sender's ring it returned, bit k for slab k. */
    public int returnedSlabs() {
        return segment.get(U32, offset + RETURNED_SLABS_OFFSET);
    }

    /**
     * What is inconsistent in a RING message's (address, size, slabs), or {@code null}: either no ring (all 0)
     * or 1 to {@link Immediate#MAX_SLABS} equal slabs, each a multiple of {@link Immediate#ALIGNMENT} bytes and at
     * most {@link #MAX_SLAB_SIZE}, making a ring in range at a non-zero address that does not wrap past 2^64.
     */
    static String invalidRing(long address, long size, int slabs, int flags) {
        if ((flags & ~RING_FIXED_RKEYS) != 0 || slabs == 0 && flags != 0) {
            return "unknown ring flags " + flags;
        }
        if (size == 0 && slabs == 0) {
            return address != 0 ? "ringAddress without a ring" : null;
        }
        if (slabs < 1 || slabs > Immediate.MAX_SLABS) {
            return "slabs " + slabs + " outside 1-" + Immediate.MAX_SLABS;
        }
        if (size < ConnectParameters.MIN_RING_SIZE || size > ConnectParameters.MAX_RING_SIZE || size % slabs != 0
                || size / slabs % Immediate.ALIGNMENT != 0 || size / slabs > MAX_SLAB_SIZE) {
            return "ringSize " + size + " is not " + slabs + " slabs of a multiple of " + Immediate.ALIGNMENT
                    + " bytes up to " + MAX_SLAB_SIZE + " in " + ConnectParameters.MIN_RING_SIZE + "-"
                    + ConnectParameters.MAX_RING_SIZE;
        }
        if (address == 0) {
            return "ringSize " + size + " without a ringAddress";
        }
        if (Long.compareUnsigned(address + size - 1, address) < 0) {
            return "a ring of " + size + " bytes at 0x" + Long.toHexString(address) + " wraps past 2^64";
        }
        return null;
    }

    /**
     * Writes the payload of a RING message after this header: {@code slabs} rkeys from {@code rkeys}, or none
     * (address, size and slabs 0: no ring any more). Returns the payload's length.
     */
    public int writeRing(long address, int size, int[] rkeys, int slabs, int flags) {
        segment.set(U64, offset + RING_ADDRESS_OFFSET, address);
        segment.set(U32, offset + RING_SIZE_OFFSET, size);
        segment.set(U16, offset + RING_SLABS_OFFSET, (short) slabs);
        segment.set(U16, offset + RING_FLAGS_OFFSET, (short) flags);
        for (int k = 0; k < slabs; k++) {
            segment.set(U32, offset + RING_RKEYS_OFFSET + 4L * k, rkeys[k]);
        }
        return RING_FIXED_PAYLOAD + 4 * slabs;
    }

    public long ringAddress() {
        return segment.get(U64, offset + RING_ADDRESS_OFFSET);
    }

    /** How many slabs the announced ring is cut into (0: no ring). */
    public int ringSlabs() {
        return Short.toUnsignedInt(segment.get(U16, offset + RING_SLABS_OFFSET));
    }

    /** The RING message's flags ({@link #RING_FIXED_RKEYS}). */
    public int ringFlags() {
        return Short.toUnsignedInt(segment.get(U16, offset + RING_FLAGS_OFFSET));
    }

    /** The rkey of slab {@code k}'s window in a RING message. */
    public int ringRkey(int k) {
        return segment.get(U32, offset + RING_RKEYS_OFFSET + 4L * k);
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
            case TYPE_SEAL -> "SEAL";
            default -> "UNKNOWN(" + type + ')';
        };
    }

    @Override
    public String toString() {
        return "MessageHeader{type=" + typeName(type()) + ", flags=" + flags() + ", recvCredits=" + recvCredits()
                + ", returnedSlabs=0x" + Integer.toHexString(returnedSlabs()) + '}';
    }
}
