// Runs s3rver (a real S3 API server) in its own process, so memory measurements of the S3 client in the test
// process do not include the server's buffers. Prints {"port":N} once listening; exits when the parent goes.
const S3rver = require('s3rver');

const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: process.argv[2] });
server.run().then((addr) => {
  process.send({ port: addr.port });
});
process.on('disconnect', () => process.exit(0));
