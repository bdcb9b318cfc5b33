package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketShutdownOutputBySelfTest;
import org.junit.jupiter.api.Disabled;

import java.util.List;

@Disabled("Every test's peer is a java.net.ServerSocket: a TCP socket, which an RDMA queue pair cannot reach."
        + " Shutdown-output is covered by RdmaShutdownOutputByPeerTest and RdmaHalfClosedTest. See testsuite/README.md.")
class RdmaShutdownOutputBySelfTest extends SocketShutdownOutputBySelfTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.client();
    }
}
