package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.util.List;

class RdmaConnectionAttemptTest extends SocketConnectionAttemptTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.client();
    }

    @Test
    @Override
    @Disabled("Decides whether to run by probing the unroutable test host with a java.net.Socket; whether an RDMA"
            + " connect attempt to it stays pending long enough to be cancelled depends on the device (the software"
            + " device's rdma_cm reports it UNREACHABLE at once). See testsuite/README.md.")
    public void testConnectCancellation(TestInfo testInfo) throws Throwable {
        super.testConnectCancellation(testInfo);
    }
}
