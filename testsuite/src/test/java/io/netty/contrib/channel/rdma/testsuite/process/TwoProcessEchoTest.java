package io.netty.contrib.channel.rdma.testsuite.process;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Server in one JVM, client in another (this one), on the software RDMA device across processes (its TCP wire):
 * messages across the SEND / ring-write boundary echoed and checked by CRC, then a clean shutdown on both sides.
 */
@Timeout(180)
class TwoProcessEchoTest {
    @Test
    void echoAcrossTwoJvms() throws Exception {
        try (ChildJvm server = ChildJvm.start(List.of(), EchoServerProcess.class)) {
            String line = server.awaitLine("PORT ", 60);
            assertThat(line).as("the server's PORT line").isNotNull();
            int port = Integer.parseInt(line.substring(5).trim());

            EchoClientProcess.echo("127.0.0.1", port);

            server.closeInput();
            assertThat(server.awaitExit(60)).as("server exit code").isZero();
            assertThat(server.output()).as("the server's output after shutdown").contains("STOPPED");
        }
    }
}
