package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.FileRegion;
import io.netty.util.AbstractReferenceCounted;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Reading file regions into buffers one message at a time. */
class FileRegionChunkerTest {
    private final UnpooledByteBufAllocator alloc = new UnpooledByteBufAllocator(true, false, false);

    @TempDir
    Path dir;

    @Test
    void readsTheRegionInPartsAndOffersAnUnsentPartAgain() throws Exception {
        byte[] content = new byte[100_000];
        new Random(1).nextBytes(content);
        Path file = Files.write(dir.resolve("data"), content);
        // A region that starts inside the file, as HTTP range responses do.
        DefaultFileRegion region = new DefaultFileRegion(file.toFile(), 1000, 90_000);
        FileRegionChunker chunker = new FileRegionChunker(alloc);
        ByteArrayOutputStream sent = new ByteArrayOutputStream();
        int parts = 0;
        try {
            for (ByteBuf part; (part = chunker.next(region, 16_384)) != null; ) {
                assertThat(part.readableBytes()).isLessThanOrEqualTo(16_384);
                // Not sent (no credit): the same bytes again, nothing read twice.
                assertThat(chunker.next(region, 16_384)).isSameAs(part);
                byte[] bytes = new byte[part.readableBytes()];
                part.getBytes(part.readerIndex(), bytes);
                sent.write(bytes);
                part.retain();  // what a send does
                chunker.sent();
                assertThat(part.refCnt()).isEqualTo(1);
                part.release();
                parts++;
            }
        } finally {
            region.release();
        }
        assertThat(parts).isEqualTo(6);
        byte[] expected = new byte[90_000];
        System.arraycopy(content, 1000, expected, 0, expected.length);
        assertThat(sent.toByteArray()).isEqualTo(expected);
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void aRegionThatEndsBeforeItsCountFailsAndKeepsNoBuffer() {
        Lying region = new Lying(10_000, 3_000);
        FileRegionChunker chunker = new FileRegionChunker(alloc);
        assertThatThrownBy(() -> {
            for (ByteBuf part; (part = chunker.next(region, 8192)) != null; ) {
                chunker.sent();
            }
        }).isInstanceOf(EOFException.class).hasMessageContaining("10000 bytes ended after 3000");
        // The buffer of the failed read was released.
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void anEmptyRegionHasNoPart() throws Exception {
        FileRegionChunker chunker = new FileRegionChunker(alloc);
        assertThat(chunker.next(new Lying(0, 0), 8192)).isNull();
    }

    /** A region that says it has {@code count} bytes and delivers {@code available}. */
    private static final class Lying extends AbstractReferenceCounted implements FileRegion {
        private final long count;
        private final long available;
        private long transferred;

        Lying(long count, long available) {
            this.count = count;
            this.available = available;
        }

        @Override
        public long transferTo(WritableByteChannel target, long position) throws java.io.IOException {
            int n = (int) Math.min(1000, available - transferred);
            if (n <= 0) {
                return 0;
            }
            int written = target.write(java.nio.ByteBuffer.allocate(n));
            transferred += written;
            return written;
        }

        @Override
        public long position() {
            return 0;
        }

        @Override
        public long transfered() {
            return transferred;
        }

        @Override
        public long transferred() {
            return transferred;
        }

        @Override
        public long count() {
            return count;
        }

        @Override
        public FileRegion retain() {
            super.retain();
            return this;
        }

        @Override
        public FileRegion retain(int increment) {
            super.retain(increment);
            return this;
        }

        @Override
        public FileRegion touch() {
            return this;
        }

        @Override
        public FileRegion touch(Object hint) {
            return this;
        }

        @Override
        protected void deallocate() {
        }
    }
}
