package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.AbstractReferenceCountedByteBuf;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.Recycler;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ScatteringByteChannel;

/**
 * A direct buffer in registered memory: a slot of a pooled chunk, or a dedicated chunk. Reads and writes go
 * through the chunk's {@link MemorySegment}, so they need no {@code sun.misc.Unsafe} (which Netty leaves off on
 * Java 25) and fail cleanly instead of touching freed memory if the allocator was closed. Growing moves the
 * content to a larger slot, still registered. Instances are recycled.
 */
public final class RegisteredByteBuf extends AbstractReferenceCountedByteBuf implements RegisteredBuffer {

    private static final ValueLayout.OfShort SHORT_BE =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfShort SHORT_LE =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt INT_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG_LE =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** Bounds the temporary array used for stream I/O. */
    private static final int STREAM_COPY_SIZE = 8192;

    private static final Recycler<RegisteredByteBuf> RECYCLER = new Recycler<>() {
        @Override
        protected RegisteredByteBuf newObject(Handle<RegisteredByteBuf> handle) {
            return new RegisteredByteBuf(handle);
        }
    };

    private final Recycler.Handle<RegisteredByteBuf> recyclerHandle;
    private ByteBufAllocator alloc;
    private RegisteredMemoryPool pool;
    private Chunk chunk;
    private MemorySegment memory;
    private int offset;
    private int slotLength;
    private int capacity;
    private long address;
    private ByteBuffer tmpNioBuf;
    /** Set while the memory is a range of an external region rather than a pool slot. */
    private ExternalRegion region;
    private long regionToken;

    private RegisteredByteBuf(Recycler.Handle<RegisteredByteBuf> recyclerHandle) {
        super(0);
        this.recyclerHandle = recyclerHandle;
    }

    static RegisteredByteBuf newInstance(ByteBufAllocator alloc, RegisteredMemoryPool pool, int maxCapacity) {
        RegisteredByteBuf buf = RECYCLER.get();
        buf.alloc = alloc;
        buf.pool = pool;
        buf.maxCapacity(maxCapacity);
        buf.resetRefCnt();
        buf.capacity = 0;
        buf.setIndex(0, 0);
        buf.markReaderIndex();
        buf.markWriterIndex();
        return buf;
    }

    /** Called by the pool when it hands this buffer memory. */
    void setMemory(Chunk chunk, int offset, int slotLength, int capacity) {
        this.chunk = chunk;
        this.offset = offset;
        this.slotLength = slotLength;
        this.capacity = capacity;
        memory = chunk.memory;
        address = chunk.address + offset;
        tmpNioBuf = null;
        region = null;
    }

    /** Points this buffer at a range of an external region; the region hears of it when the range is let go. */
    void setExternalMemory(Chunk chunk, int offset, int length, ExternalRegion region, long token) {
        setMemory(chunk, offset, length, length);
        this.region = region;
        this.regionToken = token;
    }

    /** Gives back memory this buffer no longer points at. */
    private void freeMemory(Chunk chunk, int offset, int slotLength) {
        ExternalRegion region = this.region;
        if (region != null) {
            this.region = null;
            region.released(regionToken);
        } else {
            pool.free(chunk, offset, slotLength);
        }
    }

    int slotLength() {
        return slotLength;
    }

    @Override
    public int lkey() {
        return chunk.lkey;
    }

    @Override
    public RegisteredMemoryPool pool() {
        return pool;
    }

    @Override
    public boolean hasMemoryAddress() {
        return true;
    }

    @Override
    public long memoryAddress() {
        ensureAccessible();
        return address;
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public ByteBuf capacity(int newCapacity) {
        checkNewCapacity(newCapacity);
        if (newCapacity == capacity) {
            return this;
        }
        // Stay in the slot unless it is outgrown, or more than half of it would be wasted.
        if (newCapacity <= slotLength
                && (newCapacity > slotLength >>> 1 || slotLength <= RegisteredMemoryPool.MIN_SIZE)) {
            if (newCapacity < capacity) {
                trimIndicesToCapacity(newCapacity);
            }
            capacity = newCapacity;
            return this;
        }
        Chunk oldChunk = chunk;
        ExternalRegion oldRegion = region;
        long oldToken = regionToken;
        MemorySegment oldMemory = memory;
        int oldOffset = offset;
        int oldSlotLength = slotLength;
        int bytesToCopy = Math.min(capacity, newCapacity);
        if (newCapacity < capacity) {
            trimIndicesToCapacity(newCapacity);
        }
        pool.allocate(this, newCapacity);
        MemorySegment.copy(oldMemory, oldOffset, memory, offset, bytesToCopy);
        if (oldRegion != null) {
            oldRegion.released(oldToken);
        } else {
            pool.free(oldChunk, oldOffset, oldSlotLength);
        }
        return this;
    }

    @Override
    protected void deallocate() {
        Chunk chunk = this.chunk;
        this.chunk = null;
        memory = null;
        tmpNioBuf = null;
        alloc = null;
        freeMemory(chunk, offset, slotLength);
        pool = null;
        recyclerHandle.recycle(this);
    }

    @Override
    public ByteBufAllocator alloc() {
        return alloc;
    }

    @Override
    @SuppressWarnings("deprecation")
    public ByteOrder order() {
        return ByteOrder.BIG_ENDIAN;
    }

    @Override
    public ByteBuf unwrap() {
        return null;
    }

    @Override
    public boolean isDirect() {
        return true;
    }

    @Override
    public boolean isContiguous() {
        return true;
    }

    @Override
    public boolean hasArray() {
        return false;
    }

    @Override
    public byte[] array() {
        throw new UnsupportedOperationException("direct buffer");
    }

    @Override
    public int arrayOffset() {
        throw new UnsupportedOperationException("direct buffer");
    }

    @Override
    protected byte _getByte(int index) {
        return memory.get(ValueLayout.JAVA_BYTE, offset + (long) index);
    }

    @Override
    protected short _getShort(int index) {
        return memory.get(SHORT_BE, offset + (long) index);
    }

    @Override
    protected short _getShortLE(int index) {
        return memory.get(SHORT_LE, offset + (long) index);
    }

    @Override
    protected int _getUnsignedMedium(int index) {
        return (_getByte(index) & 0xff) << 16 | (_getByte(index + 1) & 0xff) << 8 | _getByte(index + 2) & 0xff;
    }

    @Override
    protected int _getUnsignedMediumLE(int index) {
        return _getByte(index) & 0xff | (_getByte(index + 1) & 0xff) << 8 | (_getByte(index + 2) & 0xff) << 16;
    }

    @Override
    protected int _getInt(int index) {
        return memory.get(INT_BE, offset + (long) index);
    }

    @Override
    protected int _getIntLE(int index) {
        return memory.get(INT_LE, offset + (long) index);
    }

    @Override
    protected long _getLong(int index) {
        return memory.get(LONG_BE, offset + (long) index);
    }

    @Override
    protected long _getLongLE(int index) {
        return memory.get(LONG_LE, offset + (long) index);
    }

    @Override
    protected void _setByte(int index, int value) {
        memory.set(ValueLayout.JAVA_BYTE, offset + (long) index, (byte) value);
    }

    @Override
    protected void _setShort(int index, int value) {
        memory.set(SHORT_BE, offset + (long) index, (short) value);
    }

    @Override
    protected void _setShortLE(int index, int value) {
        memory.set(SHORT_LE, offset + (long) index, (short) value);
    }

    @Override
    protected void _setMedium(int index, int value) {
        _setByte(index, value >>> 16);
        _setByte(index + 1, value >>> 8);
        _setByte(index + 2, value);
    }

    @Override
    protected void _setMediumLE(int index, int value) {
        _setByte(index, value);
        _setByte(index + 1, value >>> 8);
        _setByte(index + 2, value >>> 16);
    }

    @Override
    protected void _setInt(int index, int value) {
        memory.set(INT_BE, offset + (long) index, value);
    }

    @Override
    protected void _setIntLE(int index, int value) {
        memory.set(INT_LE, offset + (long) index, value);
    }

    @Override
    protected void _setLong(int index, long value) {
        memory.set(LONG_BE, offset + (long) index, value);
    }

    @Override
    protected void _setLongLE(int index, long value) {
        memory.set(LONG_LE, offset + (long) index, value);
    }

    @Override
    public ByteBuf getBytes(int index, ByteBuf dst, int dstIndex, int length) {
        checkDstIndex(index, length, dstIndex, dst.capacity());
        if (dst instanceof RegisteredByteBuf other) {
            MemorySegment.copy(memory, offset + (long) index, other.memory, other.offset + (long) dstIndex, length);
        } else if (dst.hasMemoryAddress()) {
            // A slice or duplicate of a registered buffer, or another direct buffer: no ByteBuffer per copy.
            MemorySegment.copy(memory, offset + (long) index, at(dst.memoryAddress() + dstIndex, length), 0, length);
        } else if (dst.hasArray()) {
            getBytes(index, dst.array(), dst.arrayOffset() + dstIndex, length);
        } else if (dst.nioBufferCount() > 0) {
            for (ByteBuffer bb : dst.nioBuffers(dstIndex, length)) {
                int bbLength = bb.remaining();
                getBytes(index, bb);
                index += bbLength;
            }
        } else {
            dst.setBytes(dstIndex, this, index, length);
        }
        return this;
    }

    /** The {@code length} bytes at {@code address} of a live buffer the caller holds (bounds checked by it). */
    private static MemorySegment at(long address, int length) {
        return MemorySegment.ofAddress(address).reinterpret(length);
    }

    @Override
    public ByteBuf getBytes(int index, byte[] dst, int dstIndex, int length) {
        checkDstIndex(index, length, dstIndex, dst.length);
        MemorySegment.copy(memory, ValueLayout.JAVA_BYTE, offset + (long) index, dst, dstIndex, length);
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, ByteBuffer dst) {
        int length = dst.remaining();
        checkIndex(index, length);
        MemorySegment.copy(memory, offset + (long) index, MemorySegment.ofBuffer(dst), 0, length);
        dst.position(dst.position() + length);
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, OutputStream out, int length) throws IOException {
        checkIndex(index, length);
        byte[] tmp = new byte[Math.min(length, STREAM_COPY_SIZE)];
        while (length > 0) {
            int n = Math.min(length, tmp.length);
            getBytes(index, tmp, 0, n);
            out.write(tmp, 0, n);
            index += n;
            length -= n;
        }
        return this;
    }

    @Override
    public int getBytes(int index, GatheringByteChannel out, int length) throws IOException {
        checkIndex(index, length);
        return length == 0 ? 0 : out.write(internalNioBuffer(index, length));
    }

    @Override
    public int getBytes(int index, FileChannel out, long position, int length) throws IOException {
        checkIndex(index, length);
        return length == 0 ? 0 : out.write(internalNioBuffer(index, length), position);
    }

    @Override
    public ByteBuf setBytes(int index, ByteBuf src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.capacity());
        if (src instanceof RegisteredByteBuf other) {
            MemorySegment.copy(other.memory, other.offset + (long) srcIndex, memory, offset + (long) index, length);
        } else if (src.hasMemoryAddress()) {
            // A slice or duplicate of a registered buffer, or another direct buffer: no ByteBuffer per copy.
            MemorySegment.copy(at(src.memoryAddress() + srcIndex, length), 0, memory, offset + (long) index, length);
        } else if (src.hasArray()) {
            setBytes(index, src.array(), src.arrayOffset() + srcIndex, length);
        } else if (src.nioBufferCount() > 0) {
            for (ByteBuffer bb : src.nioBuffers(srcIndex, length)) {
                int bbLength = bb.remaining();
                setBytes(index, bb);
                index += bbLength;
            }
        } else {
            src.getBytes(srcIndex, this, index, length);
        }
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, byte[] src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.length);
        MemorySegment.copy(src, srcIndex, memory, ValueLayout.JAVA_BYTE, offset + (long) index, length);
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, ByteBuffer src) {
        int length = src.remaining();
        checkIndex(index, length);
        MemorySegment.copy(MemorySegment.ofBuffer(src), 0, memory, offset + (long) index, length);
        src.position(src.position() + length);
        return this;
    }

    @Override
    public int setBytes(int index, InputStream in, int length) throws IOException {
        checkIndex(index, length);
        byte[] tmp = new byte[Math.min(length, STREAM_COPY_SIZE)];
        int read = in.read(tmp, 0, tmp.length);
        if (read > 0) {
            setBytes(index, tmp, 0, read);
        }
        return read;
    }

    @Override
    public int setBytes(int index, ScatteringByteChannel in, int length) throws IOException {
        checkIndex(index, length);
        try {
            return in.read(internalNioBuffer(index, length));
        } catch (ClosedChannelException ignored) {
            return -1;
        }
    }

    @Override
    public int setBytes(int index, FileChannel in, long position, int length) throws IOException {
        checkIndex(index, length);
        try {
            return in.read(internalNioBuffer(index, length), position);
        } catch (ClosedChannelException ignored) {
            return -1;
        }
    }

    @Override
    public ByteBuf copy(int index, int length) {
        checkIndex(index, length);
        return alloc().directBuffer(length, maxCapacity()).writeBytes(this, index, length);
    }

    @Override
    public int nioBufferCount() {
        return 1;
    }

    @Override
    public ByteBuffer nioBuffer(int index, int length) {
        checkIndex(index, length);
        return memory.asSlice(offset + (long) index, length).asByteBuffer();
    }

    @Override
    public ByteBuffer internalNioBuffer(int index, int length) {
        checkIndex(index, length);
        ByteBuffer tmp = tmpNioBuf;
        if (tmp == null) {
            tmpNioBuf = tmp = memory.asSlice(offset, slotLength).asByteBuffer();
        }
        return tmp.clear().position(index).limit(index + length);
    }

    @Override
    public ByteBuffer[] nioBuffers(int index, int length) {
        return new ByteBuffer[] { nioBuffer(index, length) };
    }
}
