package io.netty.contrib.channel.rdma.microbench;

import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

/**
 * Encoding and decoding of what two peers say (internal.protocol): the 8-byte {@link MessageHeader} in front of
 * every SEND (written and validated once per message on the data path), the {@link Immediate} of ring writes, and
 * the {@link ConnectParameters} of the rdma_cm private data (once per connection). Flyweights over native memory,
 * as the transport uses them: run with {@code -prof gc} to see that none of them allocates.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ProtocolBenchmark {
    private final Arena arena = Arena.ofShared();
    private final MessageHeader header = new MessageHeader();
    private final ConnectParameters parameters = new ConnectParameters();
    private MemorySegment headers;
    private MemorySegment privateData;
    private int counter;

    @Setup
    public void setUp() {
        // A header slot of the send queue's header region, and the 56 bytes of rdma_cm private data.
        headers = arena.allocate(256L * MessageHeader.LENGTH, 4096);
        privateData = arena.allocate(56, 8);
        header.wrap(headers, 0).write(MessageHeader.TYPE_DATA, 3, 65536);
        parameters.wrap(privateData).writeHeader().recvCredits(64).recvBufferSize(8192);
    }

    @TearDown
    public void tearDown() {
        arena.close();
    }

    /** Varies from call to call, so that nothing is folded into constants. */
    private int next() {
        return counter = (counter + 1) & 0xFF;
    }

    @Benchmark
    public MessageHeader messageHeaderEncode() {
        int i = next();
        return header.wrap(headers, (long) i * MessageHeader.LENGTH).write(MessageHeader.TYPE_DATA, i, i << 6);
    }

    @Benchmark
    public int messageHeaderDecode() {
        header.wrap(headers, 0).validate(MessageHeader.LENGTH + next());
        return header.type() + header.recvCredits() + header.returnedSlabs();
    }

    @Benchmark
    public int immediateEncodeDecode() {
        int immediate = Immediate.encode(next() + 1, counter & 15, (counter & 1) != 0, (counter & 2) != 0);
        return Immediate.length(immediate) + Immediate.slab(immediate) + (Immediate.seal(immediate) ? 1 : 0)
                + (Immediate.generation(immediate) ? 2 : 0)
                + (int) Immediate.alignedLength(Immediate.length(immediate));
    }

    @Benchmark
    public ConnectParameters connectParametersEncode() {
        int i = next();
        return parameters.wrap(privateData).writeHeader().recvCredits(64 + (i & 63)).recvBufferSize(8192);
    }

    @Benchmark
    public long connectParametersDecode() {
        parameters.wrap(privateData).validate(ConnectParameters.LENGTH + next());
        return parameters.ringAddress() + parameters.ringRkey() + parameters.ringSize() + parameters.recvCredits()
                + parameters.recvBufferSize();
    }
}
