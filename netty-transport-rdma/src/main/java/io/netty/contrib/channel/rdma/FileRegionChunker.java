package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.FileRegion;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * Reads a {@link FileRegion} into registered memory one message at a time: RDMA has no sendfile, so a file's bytes
 * are sent like any registered buffer. A part read but not yet sent (the peer had no credit) is kept and offered
 * again, so that nothing is read twice. Loop-thread confined.
 */
final class FileRegionChunker {
    private final ByteBufAllocator alloc;
    /** The part read and not yet sent. */
    private ByteBuf part;

    FileRegionChunker(ByteBufAllocator alloc) {
        this.alloc = alloc;
    }

    /**
     * The next part of {@code region}, up to {@code maxBytes}: the one read before if it was not {@link #sent()},
     * else a new buffer read from where the region says it got to. {@code null} when the region has nothing more.
     * The chunker keeps the buffer's reference.
     *
     * @throws EOFException when the region ends before its count
     */
    ByteBuf next(FileRegion region, int maxBytes) throws IOException {
        if (part != null) {
            return part;
        }
        long remaining = region.count() - region.transferred();
        if (remaining <= 0) {
            return null;
        }
        int size = (int) Math.min(remaining, maxBytes);
        ByteBuf buf = alloc.directBuffer(size, size);
        try {
            Target target = new Target(buf);
            // The region says how far it got: stop there, even if it wrote less than it counted.
            while (buf.isWritable() && region.transferred() < region.count()) {
                if (region.transferTo(target, region.transferred()) <= 0) {
                    throw new EOFException("file region of " + region.count() + " bytes ended after "
                            + region.transferred() + " bytes");
                }
            }
        } catch (IOException | RuntimeException e) {
            buf.release();
            throw e;
        }
        if (!buf.isReadable()) {
            buf.release();
            return null;
        }
        part = buf;
        return buf;
    }

    /** The part {@link #next} returned was handed to a send, which holds its own reference. */
    void sent() {
        part.release();
        part = null;
    }

    void release() {
        if (part != null) {
            part.release();
            part = null;
        }
    }

    /** Where a region writes what it reads: the writable part of a buffer. */
    private static final class Target implements WritableByteChannel {
        private final ByteBuf buf;

        Target(ByteBuf buf) {
            this.buf = buf;
        }

        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), buf.writableBytes());
            buf.writeBytes(src.slice(src.position(), n));
            src.position(src.position() + n);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }
}
