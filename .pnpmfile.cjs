// pnpm hooks for this workspace.
//
// beforePacking: a published manifest carries what a consumer installs, nothing else.
// devDependencies are never installed by a consumer, and some of them name private
// workspace packages (`@keyway/sql`, bundled into the SQL adapters at build time), which
// must never appear in a published manifest.
module.exports = {
  hooks: {
    beforePacking(pkg) {
      delete pkg.devDependencies;
      return pkg;
    },
  },
};
