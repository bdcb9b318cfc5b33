package io.netty.contrib.channel.rdma.testsuite;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * The IP address the tests bind and connect to: the system property {@value #PROPERTY}, default 127.0.0.1.
 * The software device accepts loopback addresses; the kernel's rdma_cm refuses them, so on a real device (kernel
 * rxe, hardware) the property names the address of the RDMA netdev ({@code testsuite/rxe-vm} uses 198.18.0.1 on a
 * dummy netdev).
 */
public final class TestAddress {
    public static final String PROPERTY = "io.netty.contrib.rdma.test.address";
    private static final InetAddress ADDRESS;

    static {
        String configured = System.getProperty(PROPERTY, "127.0.0.1");
        try {
            ADDRESS = InetAddress.getByName(configured);
        } catch (UnknownHostException e) {
            throw new ExceptionInInitializerError(new IllegalArgumentException("-D" + PROPERTY + "=" + configured
                    + " is not an IP address", e));
        }
    }

    private TestAddress() {
    }

    public static InetAddress get() {
        return ADDRESS;
    }

    /** The address as a literal (for APIs that take a host string). */
    public static String host() {
        return ADDRESS.getHostAddress();
    }
}
