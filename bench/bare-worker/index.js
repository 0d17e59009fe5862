// The floor under the floor: a hello-world Worker under the same wrangler dev, so the bench can
// tell what wrangler dev and workerd cost before relay-edge does anything.
export default {
  fetch() {
    return new Response("ok");
  },
};
