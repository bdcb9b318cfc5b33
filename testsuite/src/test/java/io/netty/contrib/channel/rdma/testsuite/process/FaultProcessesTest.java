package io.netty.contrib.channel.rdma.testsuite.process;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.contrib.channel.rdma.testsuite.TestAddress;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The fault matrix's two programs (testsuite/rxe-vm/faults.sh) without a fault, on whatever device the library
 * path chose: the client's streams verify every byte, survive, a new client is answered, the gRPC calls beside
 * them come back intact and none fails, a new gRPC channel makes its call, no queue pair is left on either side;
 * and a stream's bytes are a function of stream and position, so a reordering shows.
 */
@Timeout(300)
class FaultProcessesTest {
    @Test
    void cleanRowVerifiesEveryByteAndLeavesNothing() throws Exception {
        try (ChildJvm server = ChildJvm.start(List.of(), FaultServerProcess.class, TestAddress.host(), "0",
                "17")) {
            String grpcLine = server.awaitLine("GRPC-PORT ", 150);
            assertThat(grpcLine).as(() -> "the server's GRPC-PORT line; " + server.diagnose()).isNotNull();
            String grpcPort = grpcLine.substring("GRPC-PORT ".length()).trim();
            String line = server.awaitLine("PORT ", 150);
            assertThat(line).as(() -> "the server's PORT line; " + server.diagnose()).isNotNull();
            String port = line.substring(5).trim();
            try (ChildJvm client = ChildJvm.start(List.of(), FaultClientProcess.class, TestAddress.host(), port,
                    "2", "17", "3", "2", grpcPort)) {
                String result = client.awaitLine("RESULT ", 150);
                assertThat(result).as("the client's RESULT line (output: %s)", client.output()).isNotNull()
                        .contains("streams=2 survived=2 ").contains(" mismatches=0 ")
                        .doesNotContain("verifiedBytes=0 ");
                assertThat(client.output()).as("client output")
                        .anyMatch(l -> l.startsWith("NEWCLIENT ok "))
                        .anyMatch(l -> l.equals("GRPC-CONNECTED ok"))
                        .anyMatch(l -> l.startsWith("GRPC calls=") && l.contains(" failed=0 ")
                                && l.contains(" mismatches=0 ") && !l.contains(" ok=0 "))
                        .anyMatch(l -> l.startsWith("GRPC-NEW ok "))
                        .contains("CLIENT-QPS 0")
                        .filteredOn(l -> l.startsWith("STREAM "))
                        .hasSize(2)
                        .allMatch(l -> l.contains("mismatch=none closed=open writesFailed=0 writesPending=0 "
                                + "cause=none"));
                assertThat(client.awaitExit(60)).as("client exit code").isZero();
            }
            // The gRPC server's children are on the same loop: their queue pairs go once their disconnects arrive.
            String stats = null;
            for (int i = 0; i < 30 && (stats == null || !stats.contains(" qps=0 ")); i++) {
                if (stats != null) {
                    Thread.sleep(1000);
                }
                server.send("stats");
                stats = server.awaitLine("STATS ", 30);
            }
            assertThat(stats).as("the server's STATS line").contains("channels=0 accepted=3 closed=3 qps=0 ");
            server.closeInput();
            assertThat(server.awaitExit(60)).as("server exit code").isZero();
            assertThat(server.output()).contains("STOPPED");
        }
    }

    @Test
    void streamBytesDependOnStreamAndPosition() {
        byte[] a = new byte[64];
        byte[] b = new byte[64];
        byte[] c = new byte[64];
        for (int i = 0; i < 64; i++) {
            a[i] = FaultClientProcess.at(0, i);
            b[i] = FaultClientProcess.at(0, i + 8);
            c[i] = FaultClientProcess.at(1, i);
        }
        assertThat(a).as("shifted by one word").isNotEqualTo(b);
        assertThat(a).as("another stream").isNotEqualTo(c);
        assertThat(FaultClientProcess.at(0, 5)).isEqualTo(FaultClientProcess.at(0, 5));
    }
}
