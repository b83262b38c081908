import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.h2.H2Backend;

/**
 * A MongoDB stand-in of a test's own: mongo-java-server with its H2 backend
 * in memory (the shared stand-in of scripts/services.sh keeps a file),
 * bound to 127.0.0.1 on the port given (0 or none: any free port). Once
 * bound it prints "listening on 127.0.0.1:PORT" and serves until killed.
 *
 *   java -cp '.services/mongo/lib/*' scripts/mongo-stand-in.java [PORT]
 *
 * (or `scripts/services.sh private-mongo [PORT]`, which fetches the jars
 * first). A test can pause it (SIGSTOP) and resume it (SIGCONT) without
 * touching the shared stand-in on 27017.
 */
public class MongoStandIn {
  public static void main(String[] args) {
    int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
    MongoServer server = new MongoServer(H2Backend.inMemory());
    server.bind("127.0.0.1", port);
    Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
    System.out.println("listening on 127.0.0.1:" + server.getLocalAddress().getPort());
    System.out.flush();
  }
}
